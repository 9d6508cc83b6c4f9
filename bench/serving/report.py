"""Markdown tables of ratios, and the two headline numbers, from one suite result."""

from __future__ import annotations

import math
from typing import Any

OURS = "ours"
OURS_NO_RADIX = "ours (no radix)"
OURS_BASELINE = "ours (baseline)"


def _ms(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:,.0f}"


def _ratio(numerator: float, denominator: float) -> str:
    if not denominator or math.isnan(numerator) or math.isnan(denominator):
        return "—"
    return f"{numerator / denominator:.2f}x"


def _ran(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in result["systems"].items() if "error" not in r}


def random_table(result: dict[str, Any], reference: str = OURS) -> str:
    """One row per concurrency and system; "`reference` ÷ this" compares output tok/s."""
    ran = _ran(result)
    lines = [
        (
            f"| concurrency | system | output tok/s | {reference} ÷ this | TTFT p50 / p99 ms | ITL p50 / p99 ms "
            "| TPOT p50 / p99 ms | E2E p50 / p99 ms | failed |"
        ),
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in result["config"]["concurrency"]:
        ours = ran.get(reference, {}).get("random", {}).get(str(c), {}).get("output_tok_s", float("nan"))
        for name, r in ran.items():
            s = r["random"][str(c)]
            lines.append(
                f"| {c} | {name} | {s['output_tok_s']:.1f} | {_ratio(ours, s['output_tok_s'])} "
                f"| {_ms(s['ttft_p50_ms'])} / {_ms(s['ttft_p99_ms'])} "
                f"| {_ms(s['itl_p50_ms'])} / {_ms(s['itl_p99_ms'])} "
                f"| {_ms(s['tpot_p50_ms'])} / {_ms(s['tpot_p99_ms'])} "
                f"| {_ms(s['e2e_p50_ms'])} / {_ms(s['e2e_p99_ms'])} | {s['failed']} |"
            )
    return "\n".join(lines)


def prefix_table(result: dict[str, Any]) -> str:
    ran = _ran(result)
    lines = [
        (
            "| workload | system | TTFT p50 / p99 ms | this ÷ ours TTFT p50 | E2E p50 ms | output tok/s "
            "| failed |"
        ),
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    workloads = (
        ("shared prefix", "shared_prefix", "shared_prefix"),
        ("chat turns 2+", "multi_turn_later", "multi_turn"),
    )
    for label, latency_key, rate_key in workloads:
        base = ran.get(OURS, {}).get(latency_key, {}).get("ttft_p50_ms", float("nan"))
        for name, r in ran.items():
            s, rate = r[latency_key], r[rate_key]
            lines.append(
                f"| {label} | {name} | {_ms(s['ttft_p50_ms'])} / {_ms(s['ttft_p99_ms'])} "
                f"| {_ratio(s['ttft_p50_ms'], base)} | {_ms(s['e2e_p50_ms'])} "
                f"| {rate['output_tok_s']:.1f} | {rate['failed']} |"
            )
    return "\n".join(lines)


def systems_list(result: dict[str, Any]) -> str:
    lines = []
    for name, r in result["systems"].items():
        state = f"did not run: `{r['error']}`" if "error" in r else f"`{r.get('command', '')}`"
        lines.append(f"- **{name}** ({r['precision']}; {r['notes']}): {state}")
    return "\n".join(line.replace("\n", " ") for line in lines)


def _round_rates(record: dict[str, Any], concurrency: str) -> list[float]:
    """Output tok/s of each round, in the order they ran (one, from a single-round result)."""
    summary = record["random"][concurrency]
    return summary.get("rounds_output_tok_s", [summary["output_tok_s"]])


def _rounds(record: dict[str, Any], concurrency: str) -> str:
    n = len(_round_rates(record, concurrency))
    return "1 round" if n == 1 else f"{n} rounds"


def headlines(result: dict[str, Any]) -> str:
    ran = _ran(result)
    lines = []
    top = str(max(result["config"]["concurrency"]))
    peers = {
        n: r["random"][top]["output_tok_s"]
        for n, r in ran.items()
        if n not in (OURS, OURS_NO_RADIX, OURS_BASELINE)
    }
    if OURS in ran and peers:
        best = max(peers, key=lambda n: peers[n])
        ours = ran[OURS]["random"][top]["output_tok_s"]
        line = (
            f"Output throughput at concurrency {top}: ours {ours:.1f} tok/s, best peer {best} "
            f"{peers[best]:.1f} tok/s (medians of {_rounds(ran[OURS], top)}): ratio "
            f"**{ours / peers[best]:.2f}** (target ≥ 1)."
        )
        paired = zip(_round_rates(ran[OURS], top), _round_rates(ran[best], top))
        if ratios := [f"{a / b:.2f}" for a, b in paired if b]:
            line += f" Round by round: {', '.join(ratios)}."
        lines.append(line)
    if OURS in ran and OURS_BASELINE in ran:
        now, before = (ran[name]["random"][top]["output_tok_s"] for name in (OURS, OURS_BASELINE))
        paired = zip(_round_rates(ran[OURS], top), _round_rates(ran[OURS_BASELINE], top))
        lines.append(
            f"Against the baseline engine at concurrency {top}: ours {now:.1f} tok/s, baseline "
            f"{before:.1f} tok/s: ratio **{now / before:.2f}** (1: unchanged). Round by round: "
            f"{', '.join(f'{a / b:.2f}' for a, b in paired if b)}."
        )
    if OURS in ran and OURS_NO_RADIX in ran:
        on = ran[OURS]["shared_prefix"]["ttft_p50_ms"]
        off = ran[OURS_NO_RADIX]["shared_prefix"]["ttft_p50_ms"]
        lines.append(
            f"Shared-prefix median TTFT: radix cache on {on:,.0f} ms, off {off:,.0f} ms: "
            f"**{off / on:.1f}x** lower with it (target ≥ 5x)."
        )
    return "\n\n".join(lines)


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    return "\n\n".join([
        headlines(result),
        (f"Random prompts of {cfg['prompt_len']} tokens, {cfg['output_len']} output tokens each "
        "(ignore_eos or equivalent), /v1/completions, streamed; each system's median of "
        f"{cfg.get('rounds', 1)} rounds (fresh prompts each round):"),
        random_table(result),
        (f"Shared prefix: {cfg['prefix_requests']} chats with one ~{cfg['system_tokens']}-token "
        f"system prompt and distinct questions, {cfg['prefix_concurrency']} at a time; multi-turn: "
        f"{cfg['chats']} chats of {cfg['turns']} turns at once, each turn carrying the history "
        "(TTFT over turns 2+), /v1/chat/completions:"),
        prefix_table(result),
        "Systems:",
        systems_list(result),
    ])  # fmt: skip
