"""A static-batching, OpenAI-compatible streaming server over transformers: the baseline peer.

    python -m bench.serving.transformers_server --model-path P --port N [--max-batch 32]

Static batching: whenever the model is idle, every waiting request (up to --max-batch) forms one
left-padded batch that `generate` decodes greedily until its longest request is done; requests
arriving meanwhile wait for the next batch. Serves streamed /v1/completions and
/v1/chat/completions (greedy; max_tokens, ignore_eos, stream_options.include_usage) and /health.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase
from transformers.generation.streamers import BaseStreamer

EOS_ID = 2


@dataclass
class Job:
    prompt_ids: list[int]
    max_tokens: int
    ignore_eos: bool
    loop: asyncio.AbstractEventLoop
    tokens: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)

    def emit(self, token: int | None) -> None:
        self.loop.call_soon_threadsafe(self.tokens.put_nowait, token)


class RowStreamer(BaseStreamer):
    """Hands each row's new token to its job; a row ends at max_tokens or (unless ignored) eos."""

    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs
        self.counts = [0] * len(jobs)
        self.open = [True] * len(jobs)
        self.prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self.prompt_seen:  # NOTE: generate's first put is the prompt itself
            self.prompt_seen = True
            return
        for row, token in enumerate(value.reshape(-1).tolist()):
            if not self.open[row]:
                continue
            job = self.jobs[row]
            if token == EOS_ID and not job.ignore_eos:
                self._close(row)
                continue
            job.emit(token)
            self.counts[row] += 1
            if self.counts[row] >= job.max_tokens:
                self._close(row)

    def end(self) -> None:
        for row in range(len(self.jobs)):
            if self.open[row]:
                self._close(row)

    def _close(self, row: int) -> None:
        self.open[row] = False
        self.jobs[row].emit(None)


class StaticBatcher:
    def __init__(self, model_path: str, max_batch: int) -> None:
        self.tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(model_path)
        self.tokenizer.padding_side = "left"
        self.tokenizer.pad_token_id = EOS_ID
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
        self.max_batch = max_batch
        self.waiting: asyncio.Queue[Job] = asyncio.Queue()

    async def serve_forever(self) -> None:
        while True:
            batch = [await self.waiting.get()]
            while len(batch) < self.max_batch and not self.waiting.empty():
                batch.append(self.waiting.get_nowait())
            await asyncio.to_thread(self._generate, batch)

    def _generate(self, batch: list[Job]) -> None:
        streamer = RowStreamer(batch)
        try:
            inputs = self.tokenizer.pad(
                {"input_ids": [job.prompt_ids for job in batch]}, return_tensors="pt"
            )
            longest = max(job.max_tokens for job in batch)
            at_least = max((job.max_tokens for job in batch if job.ignore_eos), default=0)
            with torch.inference_mode():
                self.model.generate(
                    **inputs,
                    do_sample=False,
                    max_new_tokens=longest,
                    min_new_tokens=at_least,
                    pad_token_id=EOS_ID,
                    streamer=streamer,
                )
        finally:
            streamer.end()


def _chunk(kind: str, model: str, text: str | None, usage: dict[str, int] | None = None) -> bytes:
    if usage is not None:
        choices: list[dict[str, Any]] = []
    elif kind == "chat":
        choices = [{"index": 0, "delta": {"content": text}, "finish_reason": None}]
    else:
        choices = [{"index": 0, "text": text, "finish_reason": None}]
    event = {
        "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


async def _stream(
    tokenizer: PreTrainedTokenizerBase, job: Job, kind: str, model: str, include_usage: bool
) -> AsyncIterator[bytes]:
    ids: list[int] = []
    sent = ""
    while (token := await job.tokens.get()) is not None:
        ids.append(token)
        text = tokenizer.decode(ids)
        # NOTE: one flat id list decodes to str; transformers types decode as str | list[str].
        assert isinstance(text, str)
        if text.endswith("\ufffd"):  # NOTE: an incomplete UTF-8 sequence: wait for more
            continue
        yield _chunk(kind, model, text[len(sent) :])
        sent = text
    if include_usage:
        usage = {"prompt_tokens": len(job.prompt_ids), "completion_tokens": len(ids),
                 "total_tokens": len(job.prompt_ids) + len(ids)}  # fmt: skip
        yield _chunk(kind, model, None, usage)
    yield b"data: [DONE]\n\n"


def build_app(batcher: StaticBatcher) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(batcher.serve_forever())
        yield
        task.cancel()

    app = FastAPI(lifespan=lifespan)
    tokenizer = batcher.tokenizer

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    async def submit(request: Request, kind: str) -> StreamingResponse | JSONResponse:
        body = await request.json()
        if not body.get("stream"):
            return JSONResponse(
                {"error": {"message": "only stream=true is served"}}, status_code=400
            )
        if kind == "chat":
            prompt = tokenizer.apply_chat_template(
                body["messages"], add_generation_prompt=True, tokenize=False
            )
        else:
            prompt = body["prompt"]
        job = Job(
            prompt_ids=tokenizer.encode(prompt, add_special_tokens=False),
            max_tokens=int(body.get("max_tokens") or 16),
            ignore_eos=bool(body.get("ignore_eos")),
            loop=asyncio.get_running_loop(),
        )
        await batcher.waiting.put(job)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        stream = _stream(tokenizer, job, kind, body.get("model", ""), include_usage)
        return StreamingResponse(stream, media_type="text/event-stream")

    @app.post("/v1/completions", response_model=None)
    async def completions(request: Request) -> StreamingResponse | JSONResponse:
        return await submit(request, "completion")

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> StreamingResponse | JSONResponse:
        return await submit(request, "chat")

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    app = build_app(StaticBatcher(args.model_path, args.max_batch))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
