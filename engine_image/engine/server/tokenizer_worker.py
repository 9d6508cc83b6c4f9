"""An HTTP/tokenizer process: the app built on the scheduler's facts, served on the port.

The launcher's own process is worker 0. With ``--tokenizer-worker-num N`` it spawns workers
1..N-1 (``run_tokenizer_worker``), each with its own ZMQ channel to the scheduler and back
from the detokenizer, all accepting on the one listening socket the launcher bound first
(handed over as a file descriptor, not a second bind with SO_REUSEPORT, which would let
another server bind the port too).
"""

from __future__ import annotations

import json
import logging
import socket
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from fastapi import FastAPI

from engine.ipc.sockets import PortArgs
from engine.ipc.startup import SchedulerReady, StartupFailed, TokenizerWorkerReady
from engine.server.context import ServerContext
from engine.server.http_server import create_app
from engine.server.http_serving import serve_app
from engine.server.server_args import ServerArgs
from engine.server.tokenizer_manager import TokenizerManager
from engine.server.tokenizer_workers import TokenizerWorkers
from engine.text.tokenizer import TextTokenizer
from engine.text.tokenizer_files import load_tokenizer


@dataclass(frozen=True)
class HttpProcessSpec:
    """What every tokenizer worker builds its app from."""

    args: ServerArgs
    tokenizer_path: str
    hf_dir: str  # the model's config.json is read from here
    port_args: PortArgs
    scheduler: SchedulerReady


def build_app(spec: HttpProcessSpec, tokenizer: TextTokenizer, workers: TokenizerWorkers) -> FastAPI:
    """The app of one worker; its TokenizerManager connects to the (ready) scheduler now."""
    ctx = ServerContext(
        args=spec.args,
        tokenizer=tokenizer,
        tokenizer_manager=TokenizerManager(spec.port_args, spec.args.batch_notify_size, workers),
        hf_config=json.loads((Path(spec.hf_dir) / "config.json").read_text()),
        context_length=spec.scheduler.context_length,
        max_total_tokens=spec.scheduler.max_total_tokens,
        model_path=spec.args.model_path,
        is_embedding=spec.scheduler.is_embedding,
    )
    return create_app(ctx)


def run_tokenizer_worker(
    spec: HttpProcessSpec, workers: TokenizerWorkers, listening: socket.socket, ready_writer: Connection
) -> None:
    """Entry of a spawned worker (1..N-1): reports ready once its app is built, then serves."""
    logging.basicConfig(
        level=spec.args.log_level.upper(),
        format=f"%(asctime)s engine tokenizer-{workers.index} %(levelname)s %(message)s",
    )
    try:
        app = build_app(spec, load_tokenizer(spec.tokenizer_path), workers)
    except Exception as err:  # noqa: BLE001 — reported to the launcher as one line
        ready_writer.send(StartupFailed(f"{type(err).__name__}: {err}".splitlines()[0]))
        sys.exit(1)
    ready_writer.send(TokenizerWorkerReady())
    serve_app(app, listening, spec.args)
