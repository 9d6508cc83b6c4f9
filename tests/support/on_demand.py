"""Driving models on demand from a test: the official openai client through an Env's router,
and a watch on how many engines run at once."""

from __future__ import annotations

import threading
from typing import Self

import openai
import psutil

from manager.state.records import RecordStore
from tests.support.gomgr_env import Env


def client(env: Env) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{env.router_url}/v1", api_key="unused", timeout=300, max_retries=0)


def ask(env: Env, model: str) -> str:
    reply = client(env).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hi."}], max_tokens=4,
    )
    return reply.choices[0].message.content or ""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def served_by(env: Env) -> list[str]:
    """The served names of the engines the records hold."""
    return [r.handle.spec.served_name for r in RecordStore(env.state).all()]


class EngineCounter:
    """Samples, every 20 ms, how many engine processes the records name are alive."""

    def __init__(self, env: Env) -> None:
        self._records = RecordStore(env.state)
        self.most = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            pids = {r.handle.pid for r in self._records.all()}
            self.most = max(self.most, sum(1 for pid in pids if alive(pid)))
