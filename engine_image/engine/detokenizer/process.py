"""Entry point of the detokenizer child process."""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection

import zmq

from engine.core.process_guard import die_with_parent, ignore_interrupts
from engine.detokenizer.manager import DetokenizerManager
from engine.ipc.messages import decode, encode
from engine.ipc.sockets import PortArgs, pull_socket, push_socket
from engine.ipc.startup import DetokenizerReady, StartupFailed
from engine.text.tokenizer_files import load_tokenizer


def run_detokenizer_process(
    tokenizer_path: str, port_args: PortArgs, ready_writer: Connection
) -> None:
    die_with_parent()
    ignore_interrupts()
    try:
        manager = DetokenizerManager(load_tokenizer(tokenizer_path), len(port_args.tokenizer_inputs))
        context = zmq.Context()
        inbox = pull_socket(context, port_args.detokenizer_input)
        outboxes = [push_socket(context, endpoint) for endpoint in port_args.tokenizer_inputs]
    except Exception as err:  # noqa: BLE001 — reported to the launcher as one line
        ready_writer.send(StartupFailed(f"{type(err).__name__}: {err}".splitlines()[0]))
        sys.exit(1)
    ready_writer.send(DetokenizerReady())
    # NOTE: blocking recv, no per-message logging; the launcher ends this process by signal.
    while True:
        for worker, reply in manager.handle(decode(inbox.recv())):
            outboxes[worker].send(encode(reply))
