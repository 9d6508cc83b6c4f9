"""Entry point of the scheduler child process."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from multiprocessing.connection import Connection
from pathlib import Path

import torch
import zmq

from engine.config.architectures import CROSS_ENCODER_ARCHITECTURES, is_classifier, is_encoder
from engine.constrained import DEFAULT_GRAMMAR_BACKEND, create_grammar_backend
from engine.core.process_guard import die_with_parent, ignore_interrupts
from engine.distributed.parallel_state import init_tensor_parallel, rendezvous_path
from engine.engine_config import EngineConfig
from engine.gguf.hf_view import hf_directory
from engine.ipc.scheduler_stats import SchedulerStats
from engine.ipc.sockets import PortArgs, pull_socket, push_socket
from engine.ipc.startup import SchedulerReady, StartupFailed
from engine.runtime.cross_encoder_runner import CrossEncoderRunner
from engine.runtime.decoder_classifier import DecoderClassifier
from engine.runtime.decoder_forward_only import DecoderForwardOnly
from engine.runtime.encoder_runner import EncoderRunner
from engine.runtime.model_runner import ModelRunner, resolve_device
from engine.scheduler.encoder_loop import EncoderServer
from engine.scheduler.forward_only import ForwardOnlyQueue
from engine.scheduler.scheduler import Scheduler
from engine.scheduler.server_loop import SchedulerServer
from engine.text.tokenizer_files import load_tokenizer


def run_scheduler_process(
    config: EngineConfig,
    port_args: PortArgs,
    log_level: str,
    ready_writer: Connection,
) -> None:
    die_with_parent()
    ignore_interrupts()
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s scheduler %(levelname)s %(message)s")
    try:
        torch.manual_seed(config.random_seed)
        if config.tp_size > 1:
            # NOTE: rank 0 is this process; the workers (scheduler/tp_worker.py) join here.
            init_tensor_parallel(0, config.tp_size, rendezvous_path(str(port_args.directory)), resolve_device(config.device))
        context = zmq.Context()
        inbox = pull_socket(context, port_args.scheduler_input)
        outbox = push_socket(context, port_args.detokenizer_input)
        config_file = Path(config.model_path) / "config.json"
        # NOTE: a missing config.json is reported by the decoder path's own check.
        architectures = json.loads(config_file.read_text()).get("architectures") or [] if config_file.is_file() else []
        server: SchedulerServer | EncoderServer
        if is_encoder(architectures):
            cross_encoder = any(arch in CROSS_ENCODER_ARCHITECTURES for arch in architectures)
            server, ready = _encoder_server(config, inbox, outbox, cross_encoder)
        else:
            server, ready = _decoder_server(config, inbox, outbox, is_classifier(architectures))
    except Exception as err:  # noqa: BLE001 — reported to the launcher as one line
        ready_writer.send(StartupFailed(f"{type(err).__name__}: {err}".splitlines()[0]))
        sys.exit(1)
    ready_writer.send(ready)
    server.run_forever()


def _decoder_server(
    config: EngineConfig, inbox: zmq.Socket[bytes], outbox: zmq.Socket[bytes], reward: bool
) -> tuple[SchedulerServer, SchedulerReady]:
    tokenizer = load_tokenizer(config.tokenizer_path or hf_directory(config.model_path))
    if reward:
        # NOTE: a reward model never decodes, so no decode graphs; it serves like an
        # embedding model (no generation routes), with or without --is-embedding.
        config = dataclasses.replace(config, disable_cuda_graph=True, is_embedding=True)
    runner = ModelRunner(config)
    extra_eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    grammars = create_grammar_backend(
        DEFAULT_GRAMMAR_BACKEND,
        tokenizer,
        runner.model_config.vocab_size,
        sorted({*runner.model_config.eos_token_ids, *extra_eos}),
    )
    scheduler = Scheduler(runner, tokenizer.decode, extra_eos, grammars)
    model = (
        DecoderClassifier(runner, scheduler.kv) if reward else DecoderForwardOnly(runner, scheduler.kv, config.is_embedding)
    )
    forward_only = ForwardOnlyQueue(model, scheduler.token_budget)
    return SchedulerServer(scheduler, inbox, outbox, forward_only), _ready_report(scheduler.stats(), config.is_embedding)


def _encoder_server(
    config: EngineConfig, inbox: zmq.Socket[bytes], outbox: zmq.Socket[bytes], cross_encoder: bool
) -> tuple[EncoderServer, SchedulerReady]:
    runner = CrossEncoderRunner(config) if cross_encoder else EncoderRunner(config)
    server = EncoderServer(runner, inbox, outbox)
    return server, _ready_report(server.stats(), is_embedding=True)


def _ready_report(stats: SchedulerStats, is_embedding: bool) -> SchedulerReady:
    """What the launcher reads from the start-up pipe once the model is loaded."""
    return SchedulerReady(
        max_total_tokens=stats.max_total_tokens,
        context_length=stats.context_length,
        device=stats.device,
        dtype=stats.dtype,
        is_embedding=is_embedding,
    )
