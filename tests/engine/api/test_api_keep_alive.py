"""An idle kept-alive connection outlives the clients' pool expiry (issue 22, item 5).

NOTE: httpx (and so the openai SDK) drops a pooled connection after 5 s idle, uvicorn's
default keep-alive timeout too; with both at 5 s a client could reuse a connection just as
the server closed it, and the request was reset (httpx.ReadError; 1 of 768 streams at 256
concurrent). The server must wait longer, so the close is always the client's.
"""

from __future__ import annotations

import http.client
import time

from tests.support.engine_process import EngineServer

HTTPX_KEEPALIVE_EXPIRY_S = 5.0


def test_connection_idle_past_the_client_pool_expiry_still_serves(server: EngineServer) -> None:
    # NOTE: http.client keeps its one socket and never reconnects behind the test's back.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for pause_s in (0.0, HTTPX_KEEPALIVE_EXPIRY_S + 1):
            time.sleep(pause_s)
            conn.request("GET", "/v1/models")
            reply = conn.getresponse()
            assert reply.status == 200 and b'"object":"list"' in reply.read()
    finally:
        conn.close()
