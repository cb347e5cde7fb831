"""One cheap file must not stall every caller. Eight requests for a
conversation whose parse is slow (3.8 MiB of malformed lines) take one worker between
them, one call at a time, while the catalogue and another conversation answer; and slow conversations that
fill the conversation pool never take the catalogue's lane. The built-in server and the ASGI app under
uvicorn alike.

No sleeps and no timing: each slow call is held at a hold point (`Gate`, around `Reader.open`) until the
test releases it, and the test waits, with a bound, on the server's own count of the requests in a lane.
How much a slow parse slows the others down in time is measured in `bench/bench_load.py`, not here.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from helpers import World, entry, header, write_session
from http_client import Response, get, uvicorn_serving

from mosaic.chat_pages import ReaderServer, asgi_app

# The lanes are the mechanism under test; their occupancy is the event the tests wait on.
from mosaic.chat_pages.testing import Lanes, lane_of

#: The hostile file: 3.8 MiB of malformed lines (two bytes each, ~1.99 million lines).
HOSTILE_BYTES = int(3.8 * 2**20)
BOUND = 60.0  # seconds any wait may take before the test fails
T = TypeVar("T")


def answered(what: str, call: Callable[[], T]) -> T:
    """`call()`, an HTTP request bounded by its timeout. A request that times out did not answer: that is
    the failure under test, reported as such (an assertion), not as a network error."""
    try:
        return call()
    except (TimeoutError, urllib.error.URLError) as e:
        raise AssertionError(f"{what} did not answer within its bound ({e})") from e


class Gate:
    """A hold point around `reader.open` of some conversations: each call signals it arrived, then waits
    for `release` (bounded; a call still held after BOUND fails). Counts the calls and the most in flight
    at once."""

    def __init__(self, world: World, conversations: set[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = threading.Event()
        self.arrived = threading.Semaphore(0)
        self._lock = threading.Lock()
        self.calls = 0
        self.in_flight = 0
        self.most = 0
        real = world.reader.open

        def held(**kw: Any) -> dict[str, Any]:
            if kw.get("conversation") not in conversations:
                return real(**kw)
            with self._lock:
                self.calls += 1
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
            self.arrived.release()
            try:
                assert self.release.wait(BOUND), "a held call was never released"
                return real(**kw)
            finally:
                with self._lock:
                    self.in_flight -= 1

        monkeypatch.setattr(world.reader, "open", held)

    def wait_arrivals(self, n: int) -> None:
        for _ in range(n):
            assert self.arrived.acquire(timeout=BOUND), "a held call did not arrive"


@contextmanager
def _serving(world: World, kind: str, workers: int = 8) -> Iterator[tuple[str, str, Lanes]]:
    """(base URL, token, lanes) of the routes over `world`'s reader: `ReaderServer` or uvicorn + asgi_app."""
    if kind == "builtin":
        srv = ReaderServer(world.reader, workers=workers).start()
        try:
            assert srv.token is not None
            yield srv.url, srv.token, srv.lanes
        finally:
            srv.close()
    else:
        app = asgi_app(world.reader, workers=workers)
        assert app.token is not None
        with uvicorn_serving(app) as url:
            yield url, app.token, app.app.lanes  # type: ignore[attr-defined]


def _in_threads(calls: list[Callable[[], Response]]
                ) -> tuple[list[threading.Thread], list[Response], list[str]]:
    """Each call on a thread of its own: (threads, responses, failures). A call that raises (a request that
    timed out while a mutant stalls the server) is a failure recorded for the test to assert on, never an
    exception that ends its thread unhandled (pytest would report that out of band, as no test's result)."""
    results: list[Response] = []
    failures: list[str] = []

    def one(call: Callable[[], Response]) -> None:
        try:
            results.append(call())
        except Exception as e:  # noqa: BLE001 - reported by the test's assertion
            failures.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=one, args=(c,), daemon=True) for c in calls]
    for t in threads:
        t.start()
    return threads, results, failures


def _small(world: World, root: Path, name: str, text: str) -> str:
    write_session(root, name, [header(root), entry("a", None, text)])
    return world.cid(root, name)


@pytest.mark.parametrize("kind", ["builtin", "uvicorn"])
def test_eight_opens_of_a_slow_conversation_take_one_worker_while_the_catalogue_and_another_answer(
        world: World, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    root = world.top / "proj"
    hostile = write_session(root, "hostile.jsonl", [header(root)])
    with open(hostile, "ab") as f:
        f.write(b"x\n" * ((HOSTILE_BYTES - hostile.stat().st_size) // 2))
    lines = sum(1 for _ in open(hostile, "rb")) - 1
    world.approve(root)
    slow = world.cid(root, "hostile.jsonl")
    other = _small(world, root, "other.jsonl", "another conversation")
    gate = Gate(world, {slow}, monkeypatch)
    with _serving(world, kind) as (url, token, lanes):
        threads, results, failures = _in_threads(
            [lambda: get(url, f"/conversations/{slow}", token=token, timeout=600)] * 8)
        try:
            gate.wait_arrivals(1)
            # All eight reached the server: one call in the reader, seven waiting on the event loop.
            assert lanes.wait_for_users(slow, 8, BOUND), f"{lanes.users(slow)} of 8 requests reached the lane"
            status, cat = answered("the catalogue", lambda: world.http(url, "/conversations", token=token))
            assert status == 200 and {r["file"] for r in cat["conversations"]} == {"hostile.jsonl", "other.jsonl"}
            status, page = answered("another conversation",
                                    lambda: world.http(url, f"/conversations/{other}", other, token=token))
            assert status == 200 and page["page"]["parts"][0]["blocks"][0]["text"] == "another conversation"
            # They answered while every one of the eight is still held or waiting.
            assert gate.calls == 1 and not results and all(t.is_alive() for t in threads)
        finally:
            gate.release.set()
            for t in threads:
                t.join(600)
    assert not failures, failures
    assert len(results) == 8 and all(status == 200 for status, _, _ in results), [r[0] for r in results]
    bodies = [json.loads(body) for _, _, body in results]
    assert len({b["page"]["snapshotDigest"] for b in bodies}) == 1
    assert all(b["view"]["unreadableLineCount"] == lines and b["view"]["unreadableRangeCount"] == 1 for b in bodies)
    # One call of the conversation in flight at a time, all eight answered.
    assert gate.calls == 8 and gate.most == 1
    assert lanes.users(slow) == 0


@pytest.mark.parametrize("kind", ["builtin", "uvicorn"])
def test_the_catalogue_answers_while_slow_conversations_fill_the_conversation_pool(
        world: World, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    root = world.top / "proj"
    slow = [_small(world, root, f"s{i}.jsonl", f"slow {i}") for i in range(3)]
    world.approve(root)
    gate = Gate(world, set(slow), monkeypatch)
    with _serving(world, kind, workers=2) as (url, token, lanes):
        threads, results, failures = _in_threads(
            [lambda c=c: get(url, f"/conversations/{c}", token=token)  # type: ignore[misc]
             for c in slow])
        try:
            gate.wait_arrivals(2)  # both workers of the conversation pool are held
            assert all(lanes.wait_for_users(c, 1, BOUND) for c in slow)  # the third waits for a worker
            status, cat = answered("the catalogue", lambda: world.http(url, "/conversations", token=token))
            assert status == 200 and len(cat["conversations"]) == 3
            assert gate.calls == 2 and not results
        finally:
            gate.release.set()
            for t in threads:
                t.join(BOUND)
    assert not failures, failures
    assert sorted(status for status, _, _ in results) == [200, 200, 200]


def test_a_request_names_its_lane() -> None:
    assert lane_of("/conversations") is None and lane_of("/conversations?x=1") is None
    assert lane_of("/elsewhere") is None and lane_of("/conversations/a/b") is None
    assert lane_of("/conversations/") is None
    assert lane_of("/conversations/pi-abc?cursor=c-1&branch=main") == "pi-abc"
    assert lane_of("/conversations/pi%2Dabc") == "pi-abc"  # the id route() resolves, percent-decoded
    with pytest.raises(ValueError):
        Lanes(0)


def test_the_catalogue_runs_on_its_own_lane_never_on_the_conversation_pool() -> None:
    """The catalogue has its own lane: its calls (and every call that names no conversation) run on the
    catalogue's threads, a conversation's on the conversation pool's, whatever holds either."""
    lanes = Lanes(workers=1, catalogue_workers=1)

    async def main() -> tuple[str, str]:
        catalogue = await lanes.run(None, lambda: threading.current_thread().name)
        conversation = await lanes.run("pi-a", lambda: threading.current_thread().name)
        return catalogue, conversation

    try:
        catalogue, conversation = asyncio.run(main())
    finally:
        lanes.close()
    assert catalogue.startswith("chat-pages-catalogue") and conversation.startswith("chat-pages-conversation")


def test_one_call_per_conversation_in_flight_the_others_wait_on_the_loop_not_for_a_worker() -> None:
    """One call per conversation in flight: the calls of a conversation behind the one in flight wait on
    the event loop, never in the pool's queue, so another conversation's call made later takes the next free
    worker before them. One worker: a1 is held in it; a2 and a3 wait; then b1 comes. When a1 ends, b1 runs
    first, then a2, then a3 (queued in the pool, a2 and a3 would have run before b1)."""
    lanes = Lanes(workers=1)
    order: list[str] = []
    first_in, release = threading.Event(), threading.Event()

    def call(name: str) -> Callable[[], str]:
        def fn() -> str:
            order.append(name)
            if name == "a1":
                first_in.set()
                assert release.wait(BOUND), "a1 was never released"
            return name
        return fn

    async def main() -> None:
        a = [asyncio.create_task(lanes.run("pi-a", call(f"a{i}"))) for i in (1, 2, 3)]
        assert await asyncio.to_thread(first_in.wait, BOUND), "a1 never reached the worker"
        assert await asyncio.to_thread(lanes.wait_for_users, "pi-a", 3, BOUND), "a2 and a3 never came"
        b = asyncio.create_task(lanes.run("pi-b", call("b1")))
        assert await asyncio.to_thread(lanes.wait_for_users, "pi-b", 1, BOUND), "b1 never came"
        release.set()
        await asyncio.gather(*a, b)

    try:
        asyncio.run(main())
    finally:
        release.set()
        lanes.close()
    assert order == ["a1", "b1", "a2", "a3"]
