"""Tokens/s of one engine, from successive samples of its generated-token counter."""

from __future__ import annotations

from dataclasses import dataclass

from manager.tui.metrics import MetricsSample

HISTORY = 16  # rates kept: the sparkline's width


@dataclass(frozen=True)
class Throughput:
    last: MetricsSample | None = None
    rates: tuple[float, ...] = ()  # tokens/s per interval between samples, oldest first

    @property
    def inflight(self) -> int | None:
        return self.last.inflight if self.last else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.rates[-1] if self.rates else None

    def add(self, sample: MetricsSample) -> Throughput:
        previous = self.last
        if (
            previous is None
            or previous.generated_tokens is None
            or sample.generated_tokens is None
            or sample.at <= previous.at
        ):
            return Throughput(sample, self.rates)
        # NOTE: a counter that went down belongs to a restarted engine: no rate for that step.
        delta = sample.generated_tokens - previous.generated_tokens
        if delta < 0:
            return Throughput(sample, self.rates)
        rate = delta / (sample.at - previous.at)
        return Throughput(sample, (*self.rates, rate)[-HISTORY:])
