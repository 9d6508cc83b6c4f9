"""`python -m manager.demo_chat [MODEL]`: one chat answer through the router (used by `make run`).

With no MODEL it asks the first model the router lists. The router's port is
$GOMGR_ROUTER_PORT, else 8000.
"""

from __future__ import annotations

import sys

from openai import OpenAI

from manager.state.paths import router_port

QUESTION = "In one sentence: what is the capital of France?"


def main(argv: list[str]) -> None:
    client = OpenAI(base_url=f"http://127.0.0.1:{router_port()}/v1", api_key="any")
    model = argv[0] if argv else client.models.list().data[0].id
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": QUESTION}], max_tokens=48, temperature=0,
    )
    print(f"you: {QUESTION}")
    print(f"{model}: {(reply.choices[0].message.content or '').strip()}")


if __name__ == "__main__":
    main(sys.argv[1:])
