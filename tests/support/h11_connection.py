"""A light HTTP/1.1 client connection (h11 on asyncio's streams), for load tests whose
client must cost far less CPU than the server it loads."""

from __future__ import annotations

import asyncio

import h11

READ_BYTES = 65536


class Connection:
    """One keep-alive connection to 127.0.0.1:port, opened on first use and again after the
    server ends one; POSTs one request at a time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._h11 = h11.Connection(h11.CLIENT)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """The status and whole body of a JSON POST; raises h11.ProtocolError when the
        response is cut short or malformed, OSError when the connection fails."""
        if self._streams is None or self._h11.our_state is not h11.IDLE:
            await self.close()
            self._streams = await asyncio.open_connection("127.0.0.1", self.port)
            self._h11 = h11.Connection(h11.CLIENT)
        reader, writer = self._streams
        headers = [("host", f"127.0.0.1:{self.port}"), ("content-type", "application/json"),
                   ("content-length", str(len(body)))]  # fmt: skip
        head = h11.Request(method="POST", target=path, headers=headers)
        request = (head, h11.Data(data=body), h11.EndOfMessage())
        writer.write(b"".join(self._h11.send(part) or b"" for part in request))
        await writer.drain()
        status, chunks = 0, []
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                self._h11.receive_data(await reader.read(READ_BYTES))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
        # NOTE: a keep-alive connection is reused; one the server will close is reopened.
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
        return status, b"".join(chunks)

    async def close(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
