"""Entry point of a tensor-parallel worker process (ranks 1..N-1): its shard of the model,
run on each step the scheduler (rank 0) broadcasts; it never samples or answers requests."""

from __future__ import annotations

import logging
import os
import sys
from multiprocessing.connection import Connection

import torch

from engine.distributed.parallel_state import init_tensor_parallel, rendezvous_path
from engine.distributed.step_channel import rebuild, receive_step
from engine.engine_config import EngineConfig
from engine.ipc.sockets import PortArgs
from engine.ipc.startup import StartupFailed, TPWorkerReady
from engine.runtime.model_runner import ModelRunner, resolve_device

logger = logging.getLogger(__name__)


def run_tp_worker(
    config: EngineConfig, rank: int, port_args: PortArgs, log_level: str, ready_writer: Connection
) -> None:
    """Spawned by the server's supervisor, which has set the process guards already."""
    logging.basicConfig(level=log_level.upper(), format=f"%(asctime)s tp-worker-{rank} %(levelname)s %(message)s")
    try:
        torch.manual_seed(config.random_seed)
        device = resolve_device(config.device)
        state = init_tensor_parallel(rank, config.tp_size, rendezvous_path(str(port_args.directory)), device)
        runner = ModelRunner(config)
    except Exception as err:  # noqa: BLE001 — reported to the launcher as one line
        ready_writer.send(StartupFailed(f"{type(err).__name__}: {err}".splitlines()[0]))
        sys.exit(1)
    logger.info("tensor-parallel rank %d of %d ready (pid %d)", rank, config.tp_size, os.getpid())
    ready_writer.send(TPWorkerReady(rank))
    table, kv_pool = runner.req_to_token_pool.req_to_token, runner.kv_pool
    while True:
        runner.forward(rebuild(receive_step(state), table, kv_pool))
