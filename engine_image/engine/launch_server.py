"""``python -m engine.launch_server``: the engine's HTTP server and its child processes."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
from typing import NoReturn

from starlette.types import ASGIApp

from engine.core.errors import UnsupportedModelError
from engine.core.startup_collection import uncollected_start_up
from engine.gguf.hf_view import hf_directory
from engine.ipc.sockets import PortArgs
from engine.ipc.startup import SchedulerReady
from engine.server.http_serving import BACKLOG, serve_app
from engine.server.loading_responder import LoadingResponder
from engine.server.server_args import ServerArgs, parse_server_args
from engine.server.supervisor import ChildStartError, EntryPoint, Supervisor
from engine.server.thread_binding import bound_omp_threads
from engine.server.tokenizer_workers import TokenizerWorkers

logger = logging.getLogger("engine")

START_TIMEOUT_S = 1800.0
SCHEDULER_ENTRY = EntryPoint("engine.scheduler.process", "run_scheduler_process")
DETOKENIZER_ENTRY = EntryPoint("engine.detokenizer.process", "run_detokenizer_process")
TOKENIZER_WORKER_ENTRY = EntryPoint("engine.server.tokenizer_worker", "run_tokenizer_worker")
TP_WORKER_ENTRY = EntryPoint("engine.scheduler.tp_worker", "run_tp_worker")


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"engine.launch_server: error: {message}\n")
    sys.exit(1)


def _bind_port(host: str, port: int) -> socket.socket:
    """The server's socket, listening before anything else runs (as vLLM's): a taken port
    fails at once, and no other process can take it while the model loads.

    NOTE: listening, not only bound: Linux lets two SO_REUSEADDR sockets bind one port while
    neither listens, so a second server started during this one's load would bind too and
    fail only after loading. During the load a LoadingResponder answers every request 503.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as err:
        sock.close()
        _fail(f"cannot listen on {host}:{port}: {err.strerror}")
    return sock


def _metrics_dir(args: ServerArgs, port_args: PortArgs) -> str | None:
    """prometheus_client's multiprocess directory when several workers keep metrics.

    NOTE: set in the environment before any process imports prometheus_client (it picks
    its value store at import), so every worker writes its metrics where any can read all.
    """
    if not args.enable_metrics or args.tokenizer_worker_num == 1:
        return None
    directory = port_args.directory / "metrics"
    directory.mkdir()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    return str(directory)


def serve(args: ServerArgs) -> None:
    listening = _bind_port(args.host, args.port)
    port_args = PortArgs.create(args.tokenizer_worker_num)
    workers = TokenizerWorkers.create(args.tokenizer_worker_num, _metrics_dir(args, port_args))
    supervisor = Supervisor()
    # NOTE: the web stack's and the tokenizer's imports run while the children start.
    with LoadingResponder(listening), uncollected_start_up():
        app = _load(args, port_args, workers, listening, supervisor)
    try:
        serve_app(app, listening, args)
    finally:
        supervisor.stop()
        shutil.rmtree(port_args.directory, ignore_errors=True)
        logger.info("server stopped")


def _load(
    args: ServerArgs, port_args: PortArgs, workers: TokenizerWorkers, listening: socket.socket, supervisor: Supervisor
) -> ASGIApp:
    """The children started and ready, and the app over them; any failure exits with one line."""
    try:
        # NOTE: before the children start, so a GGUF's tokenizer is converted once, here.
        hf_dir = hf_directory(args.model_path)
    except UnsupportedModelError as err:
        _fail(str(err))
    tokenizer_path = args.tokenizer_path or hf_dir
    try:
        config = args.engine_config()
        # NOTE: tensor-parallel ranks share the cores (distributed/parallel_state.py): no
        # one-thread-per-core binding, which would put every rank's threads on the same cores.
        with bound_omp_threads(enabled=config.tp_size == 1):
            supervisor.spawn("scheduler", SCHEDULER_ENTRY, config, port_args, args.log_level)
        for rank in range(1, config.tp_size):
            supervisor.spawn(f"tp-worker-{rank}", TP_WORKER_ENTRY, config, rank, port_args, args.log_level)
        supervisor.spawn("detokenizer", DETOKENIZER_ENTRY, tokenizer_path, port_args)
        # NOTE: imported only now, while the children import theirs (torch takes seconds),
        # and only once the flags parsed, so a bad flag fails at once.
        from engine.server.tokenizer_worker import HttpProcessSpec, build_app
        from engine.text.tokenizer_files import load_tokenizer

        try:
            tokenizer = load_tokenizer(tokenizer_path)
        except Exception:
            # NOTE: the children load the same files; a child's one-line report says why first.
            supervisor.wait_ready(START_TIMEOUT_S)
            raise
        scheduler_info = supervisor.wait_ready(START_TIMEOUT_S)["scheduler"]
        assert isinstance(scheduler_info, SchedulerReady), "the scheduler reports SchedulerReady"
        spec = HttpProcessSpec(args, tokenizer_path, hf_dir, port_args, scheduler_info)
        # NOTE: once the scheduler listens, so every worker's socket connects at once.
        for index in range(1, args.tokenizer_worker_num):
            supervisor.spawn(f"tokenizer-{index}", TOKENIZER_WORKER_ENTRY, spec, workers.worker(index), listening)
        app = build_app(spec, tokenizer, workers)
        supervisor.wait_ready(START_TIMEOUT_S)
    except (ChildStartError, KeyboardInterrupt) as err:
        supervisor.stop()
        shutil.rmtree(port_args.directory, ignore_errors=True)
        _fail(str(err) or "interrupted during start-up")
    supervisor.watch()
    logger.info(
        "serving %s on http://%s:%d (%s, %s, %s, KV pool %d tokens, %d tokenizer worker%s)",
        args.model_name, args.host, args.port, "Granian, HTTP/2 and HTTP/1.1" if args.enable_http2 else "uvicorn",
        scheduler_info.device, scheduler_info.dtype, scheduler_info.max_total_tokens,
        args.tokenizer_worker_num, "" if args.tokenizer_worker_num == 1 else "s",
    )  # fmt: skip
    return app


def main(argv: list[str] | None = None) -> None:
    args = parse_server_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s engine %(levelname)s %(message)s")
    serve(args)


if __name__ == "__main__":
    main()
