"""Entry point of the scheduler child process."""

from __future__ import annotations

import logging
import sys
from multiprocessing.connection import Connection
from typing import Any

import torch
import zmq
from transformers import AutoTokenizer

from engine.engine_config import EngineConfig
from engine.ipc.sockets import PortArgs, pull_socket, push_socket
from engine.runtime.model_runner import ModelRunner
from engine.scheduler.scheduler import Scheduler
from engine.scheduler.server_loop import SchedulerServer
from engine.server.process_guard import die_with_parent, ignore_interrupts

logger = logging.getLogger(__name__)


def run_scheduler_process(
    config: EngineConfig,
    port_args: PortArgs,
    server_args: dict[str, Any],
    log_level: str,
    ready_writer: Connection,
) -> None:
    die_with_parent()
    ignore_interrupts()
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s scheduler %(levelname)s %(message)s")
    try:
        torch.manual_seed(config.random_seed)
        tokenizer = AutoTokenizer.from_pretrained(config.tokenizer_path or config.model_path)
        runner = ModelRunner(config)
        extra_eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
        scheduler = Scheduler(runner, tokenizer.decode, extra_eos)
        context = zmq.Context()
        server = SchedulerServer(
            scheduler,
            pull_socket(context, port_args.scheduler_input),
            push_socket(context, port_args.detokenizer_input),
            server_args,
        )
    except Exception as err:  # noqa: BLE001 — reported to the launcher as one line
        ready_writer.send({"status": "error", "message": f"{type(err).__name__}: {err}".splitlines()[0]})
        sys.exit(1)
    ready_writer.send(
        {
            "status": "ready",
            "max_total_tokens": runner.max_total_tokens,
            "context_length": runner.context_length,
            "device": str(runner.device),
            "dtype": str(runner.dtype).removeprefix("torch."),
        }
    )
    server.run_forever()
