"""The host's share of a decode step: what the scheduler does around the model's forward.

    python -m bench.host_overhead [--batches 1 8 32] [--steps 24] [--threads 1]

The offline ``Engine``'s scheduler (SmolLM2-135M, fp32, CPU) decodes ``batch`` requests
(``ignore_eos``); once every row decodes, ``--steps`` steps are timed, and within each the
time in ``ModelRunner.forward``, in sampling (``TokenSampling.sample``: the batch's sampling
tensors, the sampler), in building the batch (``Decode.build``: KV slots, the input tensors)
and in recording (``TokenSampling.record``: the ``.tolist()`` of the tokens, appending them,
the finish rules). "host" is the scheduler thread's own time in a step: with the overlap
scheduler off, the step less its forward and sampling; on, the step less its wait for the
previous step's tokens (forward and sampling run on the forward thread, so their columns
there are the steps that ran during the timed one, roughly). Medians over the steps of one
run, on whatever else the machine runs: on a shared box, read them as orders of magnitude.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

from engine.engine import Engine
from engine.sampling.params import SamplingParams
from engine.sampling.sampler import SampleOutput
from engine.scheduler.forward_thread import StepJob
from manager.models.pull import pull_model

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
T = TypeVar("T")


class Clock:
    """Seconds spent in each wrapped method during the current step (``start_step``)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def start_step(self) -> None:
        self.spent = {}

    def wrap(self, name: str, fn: Callable[..., T]) -> Callable[..., T]:
        def timed(*args: Any, **kwargs: Any) -> T:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - start

        return timed


@contextmanager
def _clocked(engine: Engine, clock: Clock) -> Iterator[None]:
    scheduler = engine.scheduler
    targets: list[tuple[object, str]] = [
        (engine.runner, "forward"),
        (scheduler.decode, "build"),
        (scheduler.sampling, "sample"),
        (scheduler.sampling, "record"),
    ]
    for owner, name in targets:
        setattr(owner, name, clock.wrap(name, getattr(owner, name)))
    overlap = scheduler.overlap
    if overlap is not None:
        submit = overlap.thread.submit

        def submit_timed(job: StepJob) -> Future[SampleOutput | None]:
            future = submit(job)
            # NOTE: the time the scheduler thread blocks on a step's tokens (setattr: mypy
            # refuses assigning to a method).
            setattr(future, "result", clock.wrap("wait", future.result))  # noqa: B010
            return future

        setattr(overlap.thread, "submit", submit_timed)  # noqa: B010
        targets.append((overlap.thread, "submit"))
    try:
        yield
    finally:
        for owner, name in targets:
            delattr(owner, name)


def measure(engine: Engine, batch: int, steps: int) -> dict[str, float]:
    """Median milliseconds per timed decode step: the step, the forward and the host's parts."""
    scheduler = engine.scheduler
    params = SamplingParams.from_dict({"temperature": 0, "max_new_tokens": steps + 8, "ignore_eos": True})
    for i in range(batch):
        ids = engine.tokenizer.encode(f"Story number {i} about a lighthouse:", add_special_tokens=False)
        scheduler.add_request(scheduler.new_request(f"b{batch}-{i}", ids, params))
    while len(scheduler.decode.running) < batch or scheduler.prefill:
        scheduler.step()
    scheduler.step()  # NOTE: with overlap, the first decode step after the prefill is not overlapped.
    rows: list[dict[str, float]] = []
    clock = Clock()
    with _clocked(engine, clock):
        for _ in range(steps):
            clock.start_step()
            start = time.perf_counter()
            scheduler.step()
            row = {"step": time.perf_counter() - start, **clock.spent}
            parts = ("wait",) if scheduler.overlap is not None else ("forward", "sample")
            row["host"] = row["step"] - sum(row.get(k, 0.0) for k in parts)
            rows.append(row)
    while not scheduler.is_idle:
        scheduler.step()
    keys = ("step", "forward", "host", "build", "sample", "record")
    return {k: 1000 * statistics.median(r.get(k, 0.0) for r in rows) for k in keys}


def run(batches: Sequence[int], steps: int, threads: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    path = str(pull_model(REPO).model.path)
    results: dict[str, Any] = {
        "command": f"python -m bench.host_overhead --batches {' '.join(map(str, batches))} --steps {steps} --threads {threads}",
        "rows": [],
    }
    for overlap in (False, True):
        engine = Engine(path, dtype="float32", max_total_tokens=8192, enable_overlap_schedule=overlap)
        measure(engine, 2, 4)  # NOTE: warm-up (kernels built, allocator warmed)
        for batch in batches:
            row = measure(engine, batch, steps)
            results["rows"].append({"overlap": overlap, "batch": batch, **row})
    return results


def markdown_table(result: dict[str, Any]) -> str:
    lines = [
        "| overlap | batch | step ms | forward ms | host ms | build ms | sample ms | record ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {'on' if r['overlap'] else 'off'} | {r['batch']} | {r['step']:.2f} | {r['forward']:.2f} | {r['host']:.2f} | "
            f"{r['build']:.3f} | {r['sample']:.3f} | {r['record']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.host_overhead")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    result = run(args.batches, args.steps, args.threads)
    print(result["command"])
    print(markdown_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
