"""Percentiles and throughput over a set of request results."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from bench.serving.client import Result


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (1..99), linear interpolation; NaN for no values."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@dataclass(frozen=True)
class Summary:
    """Latencies in milliseconds; throughput over the wall time of the whole run."""

    requests: int
    failed: int
    output_tokens: int
    wall_s: float
    output_tok_s: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    errors: list[str]  # the distinct errors of failed requests, at most three

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(results: list[Result], wall_s: float) -> Summary:
    ok = [r for r in results if r.ok]
    ttft = [r.ttft_s * 1000 for r in ok]
    itl = [gap * 1000 for r in ok for gap in r.itl_s]
    tpot = [t * 1000 for r in ok if (t := r.tpot_s) is not None]
    e2e = [r.e2e_s * 1000 for r in ok]
    tokens = sum(r.output_tokens for r in ok)
    return Summary(
        requests=len(results),
        failed=len(results) - len(ok),
        output_tokens=tokens,
        wall_s=wall_s,
        output_tok_s=tokens / wall_s if wall_s > 0 else float("nan"),
        ttft_p50_ms=percentile(ttft, 50),
        ttft_p99_ms=percentile(ttft, 99),
        itl_p50_ms=percentile(itl, 50),
        itl_p99_ms=percentile(itl, 99),
        tpot_p50_ms=percentile(tpot, 50),
        tpot_p99_ms=percentile(tpot, 99),
        e2e_p50_ms=percentile(e2e, 50),
        e2e_p99_ms=percentile(e2e, 99),
        errors=sorted({r.error for r in results if not r.ok})[:3],
    )
