"""Where a request's reader call runs: lanes that keep a slow conversation from stalling the others.

With one pool, eight requests for one conversation whose parse is slow (3.8 MiB of malformed lines) take
all eight threads of the pool, each waiting on the reader's lock of that conversation, and the catalogue
waits behind them (19 s measured). The reader itself never makes the catalogue wait (it holds no lock for
it); the pool does. So the server decides, before a thread is taken:

- **One call per conversation in flight.** A request for a conversation waits, on the event loop, for the
  call of that conversation ahead of it: an `asyncio.Lock` per conversation id, held around the worker
  call. Waiting costs no thread, so one conversation holds at most one worker whatever number of
  requests name it, and the calls after the first find its parse in the reader's snapshot cache.
- **The catalogue has its own lane.** The catalogue and every request that names no conversation run on
  a pool of their own (`CATALOGUE_WORKERS` threads) that conversation calls never use.

Each conversation thus takes at most one of the conversation pool's `workers`; others proceed on the rest.
Only as many slow conversations as there are workers, at once, can fill that pool, and the catalogue
still answers then. The locks live only while a request holds or waits for them (nothing is kept per id).

A `Lanes` belongs to one event loop (its locks are asyncio locks). `users(lane)` and `wait_for_users`
are diagnostics: how many requests of a lane are in flight or waiting.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar
from urllib.parse import unquote, urlsplit

# What the public modules show of this module; the rest is the package's own.
__all__ = ["CATALOGUE_WORKERS", "WORKERS"]

T = TypeVar("T")

#: Worker threads for conversation calls (open, next), shared by all conversations, one each at most.
WORKERS = 8
#: Worker threads for the catalogue and for requests that name no conversation.
CATALOGUE_WORKERS = 2

_PREFIX = "/conversations/"


def lane_of(target: str) -> str | None:
    """The conversation a GET target names (its lane), or None for the catalogue lane: the catalogue, and
    any target `route` answers without the reader's per-conversation work (another path, a bad id)."""
    path = urlsplit(target).path
    if not path.startswith(_PREFIX):
        return None
    conversation = unquote(path[len(_PREFIX):])
    if not conversation or "/" in conversation:
        return None
    return conversation


class Lanes:
    """The two pools and the per-conversation locks. `close()` shuts both pools down (waiting for the
    calls in flight); a closed `Lanes` makes new pools on next use, so an ASGI app can be started again."""

    def __init__(self, workers: int = WORKERS, catalogue_workers: int = CATALOGUE_WORKERS) -> None:
        if workers < 1 or catalogue_workers < 1:
            raise ValueError("each lane needs at least one worker")
        self._workers = workers
        self._catalogue_workers = catalogue_workers
        self._pool: ThreadPoolExecutor | None = None
        self._catalogue: ThreadPoolExecutor | None = None
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._changed = threading.Condition()

    def _pools(self) -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
        if self._pool is None or self._catalogue is None:
            self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="chat-pages-conversation")
            self._catalogue = ThreadPoolExecutor(self._catalogue_workers, thread_name_prefix="chat-pages-catalogue")
        return self._pool, self._catalogue

    async def run(self, lane: str | None, fn: Callable[..., T], /, *args: object) -> T:
        """`fn(*args)` on a worker of `lane`: the catalogue pool for None; for a conversation, the shared
        pool once no earlier call of the same conversation is in flight (waiting on the loop, not on a
        thread). Raises what `fn` raises."""
        loop = asyncio.get_running_loop()
        pool, catalogue = self._pools()
        if lane is None:
            return await loop.run_in_executor(catalogue, fn, *args)
        lock = self._enter(lane)
        try:
            async with lock:
                return await loop.run_in_executor(pool, fn, *args)
        finally:
            self._leave(lane)

    def _enter(self, lane: str) -> asyncio.Lock:
        with self._changed:
            lock, users = self._locks.get(lane) or (asyncio.Lock(), 0)
            self._locks[lane] = (lock, users + 1)
            self._changed.notify_all()
        return lock

    def _leave(self, lane: str) -> None:
        with self._changed:
            lock, users = self._locks[lane]
            if users == 1:
                del self._locks[lane]
            else:
                self._locks[lane] = (lock, users - 1)
            self._changed.notify_all()

    def users(self, lane: str) -> int:
        """How many requests of `lane` are in flight or waiting now (a diagnostic)."""
        with self._changed:
            return self._locks.get(lane, (None, 0))[1]

    def wait_for_users(self, lane: str, count: int, timeout: float) -> bool:
        """Block (another thread than the loop's) until `lane` has `count` requests in flight or waiting;
        False if `timeout` seconds pass first."""
        with self._changed:
            return self._changed.wait_for(lambda: self._locks.get(lane, (None, 0))[1] == count, timeout)

    def close(self) -> None:
        """Shut both pools down, waiting for the calls in flight."""
        pool, catalogue, self._pool, self._catalogue = self._pool, self._catalogue, None, None
        for p in (pool, catalogue):
            if p is not None:
                p.shutdown(wait=True)
