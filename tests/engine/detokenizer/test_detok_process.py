"""The detokenizer child process over real ZMQ ipc sockets."""

from __future__ import annotations

import multiprocessing
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from engine.detokenizer.process import run_detokenizer_process
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import (
    DetokenizeOptions,
    RequestDelta,
    TextOutputs,
    TokenOutputs,
    decode,
    encode,
)
from engine.ipc.sockets import PortArgs, pull_socket, push_socket
from engine.ipc.startup import DetokenizerReady, StartupFailed
from engine.text.tokenizer import TextTokenizer

pytestmark = pytest.mark.slow

_READY_TIMEOUT_S = 120.0
_REPLY_TIMEOUT_MS = 30_000
_EXIT_TIMEOUT_S = 10.0


@pytest.fixture
def port_args() -> Iterator[PortArgs]:
    args = PortArgs.create(tokenizer_workers=2)
    yield args
    shutil.rmtree(args.directory, ignore_errors=True)


@pytest.fixture
def context() -> Iterator[zmq.Context]:
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


def _start(
    tokenizer_path: str, port_args: PortArgs
) -> tuple[multiprocessing.process.BaseProcess, dict[str, str]]:
    """Spawns the child and waits (bounded) for its start-up report."""
    mp = multiprocessing.get_context("spawn")
    reader, writer = mp.Pipe(duplex=False)
    proc = mp.Process(
        target=run_detokenizer_process, args=(tokenizer_path, port_args, writer), daemon=True
    )
    proc.start()
    writer.close()
    try:
        assert reader.poll(_READY_TIMEOUT_S), "the detokenizer never reported start-up"
        return proc, reader.recv()
    except BaseException:
        proc.kill()
        proc.join(_EXIT_TIMEOUT_S)
        raise
    finally:
        reader.close()


def test_child_detokenizes_over_ipc(
    smollm2_dir: Path, tokenizer: TextTokenizer, port_args: PortArgs, context: zmq.Context
) -> None:
    # NOTE: bound before the child starts, so its PUSHes connect to live endpoints.
    other_inbox = pull_socket(context, port_args.tokenizer_inputs[0])
    inbox = pull_socket(context, port_args.tokenizer_inputs[1])
    proc, report = _start(str(smollm2_dir), port_args)
    try:
        assert report == DetokenizerReady()
        ids = tokenizer.encode("Hi 😀 there")
        outbox = push_socket(context, port_args.detokenizer_input)
        outbox.send(encode(DetokenizeOptions(["r1"], skip_special_tokens=True, stops=[], worker=1)))
        delta = RequestDelta("r1", ids, [0.0] * len(ids), [], FinishReason("length"), 4, len(ids), 0)
        outbox.send(encode(TokenOutputs([delta])))
        assert inbox.poll(_REPLY_TIMEOUT_MS), "no TextOutputs came back"
        reply = decode(inbox.recv())
        assert isinstance(reply, TextOutputs)
        assert [(d.rid, d.text) for d in reply.deltas] == [("r1", "Hi 😀 there")]
        assert reply.deltas[0].token_ids == ids and reply.deltas[0].finish_reason == FinishReason("length")
        assert not other_inbox.poll(0), "the output went to the worker that does not own r1"
    finally:
        proc.terminate()
        proc.join(_EXIT_TIMEOUT_S)
        if proc.is_alive():
            proc.kill()
            proc.join(_EXIT_TIMEOUT_S)
    assert not proc.is_alive()
    assert proc.exitcode == -signal.SIGTERM


def test_bad_tokenizer_path_reports_error(tmp_path: Path, port_args: PortArgs) -> None:
    # NOTE: an existing directory without tokenizer files fails locally, never asking the Hub.
    proc, report = _start(str(tmp_path), port_args)
    proc.join(_EXIT_TIMEOUT_S)
    if proc.is_alive():
        proc.kill()
        proc.join(_EXIT_TIMEOUT_S)
        pytest.fail("the detokenizer did not exit after a start-up error")
    assert isinstance(report, StartupFailed)
    assert report.message and "\n" not in report.message
    assert proc.exitcode == 1
