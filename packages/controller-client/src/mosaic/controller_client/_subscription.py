"""The client library's subscriptions (`ControllerClient.subscribe`): a bounded queue of notifications per
subscriber, with a `lagging` marker of its own where one falls behind (rule 6 of `_client.py`), and the
waiters' wake-up (`_Changes`)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._errors import ClientStateError

if TYPE_CHECKING:
    from ._values import Notification

__all__ = ["DEFAULT_QUEUE_SIZE", "Subscription", "SubscriptionClosed"]

DEFAULT_QUEUE_SIZE = 10_000
"""Server events and records a subscriber may have waiting before it lags. A run of a few thousand deltas
fits; a subscriber that sleeps through more gets a ``lagging`` marker instead of unbounded memory."""


class _Changes:
    """The waiters of a view that changes (the client, a transcript): each `wait_until` parks a future that
    `wake` resolves at every change, then re-checks its predicate."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    async def wait_until(self, predicate: Callable[[], bool], closed: Callable[[], bool], what: str) -> None:
        """Return once `predicate()` is true; ClientStateError(`what`) once `closed()` with it still false."""
        loop = asyncio.get_running_loop()
        while not predicate():
            if closed():
                raise ClientStateError(what)
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.add(future)
            try:
                await future
            finally:
                self._waiters.discard(future)

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)


# -------------------------------------------------------------------------------------- subscriptions


class SubscriptionClosed(Exception):
    """The subscription was closed (by `Subscription.close` or the client's `aclose`) and is drained."""


class _Lag:
    """A subscriber's own lagging marker while it still counts (mutable until read or closed)."""

    __slots__ = ("connection", "dropped")

    def __init__(self, connection: int) -> None:
        self.connection = connection
        self.dropped = 0


class Subscription:
    """Notifications for one subscriber, in arrival order, bounded (`_client` rule 6).

    At most `maxsize` server events and records wait; past that each one is dropped and counted in a
    ``lagging`` marker (origin "client") placed where the first was lost. Everything else (the server's
    markers and ``closing``, the client's ``observed`` and ``disconnected``) is never dropped: those are
    rare, and they are what a consumer needs to resynchronise. Iterate with ``async for``, or poll with
    `get_nowait`. Not thread-safe: use it on the client's event loop.
    """

    def __init__(self, maxsize: int, on_close: Callable[[Subscription], None]) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
            raise ValueError(f"maxsize must be a positive integer, not {maxsize!r}")
        self.maxsize = maxsize
        self.dropped = 0  # server notifications this subscriber lost, in all
        self._items: deque[tuple[Notification, bool] | _Lag] = deque()
        self._counted = 0  # droppable notifications waiting
        self._open: _Lag | None = None  # the last marker, still counting
        self._ready = asyncio.Event()
        self._closed = False
        self._on_close = on_close

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._items)

    def _put(self, note: Notification, *, droppable: bool) -> None:
        if self._closed:
            return
        if droppable:
            if self._counted >= self.maxsize:
                if self._open is None:
                    self._open = _Lag(note.connection)
                    self._items.append(self._open)
                self._open.dropped += 1
                self.dropped += 1
                return
            self._counted += 1
        self._open = None  # later losses get a marker after this notification, at their own place
        self._items.append((note, droppable))
        self._ready.set()

    def get_nowait(self) -> Notification | None:
        """The next notification, or None when none waits (closed or not)."""
        if not self._items:
            return None
        item = self._items.popleft()
        if not self._items:
            self._ready.clear()
        if isinstance(item, _Lag):
            if item is self._open:
                self._open = None
            from ._values import Notification

            return Notification("marker", {"reason": "lagging", "dropped": item.dropped}, "client", item.connection)
        note, counted = item
        if counted:
            self._counted -= 1
        return note

    async def get(self) -> Notification:
        """The next notification, waiting for one. Raises `SubscriptionClosed` once closed and drained.
        Cancellation: nothing is consumed."""
        while True:
            note = self.get_nowait()
            if note is not None:
                return note
            if self._closed:
                raise SubscriptionClosed("the subscription is closed")
            self._ready.clear()
            await self._ready.wait()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Notification:
        try:
            return await self.get()
        except SubscriptionClosed:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Stop receiving. What already waits can still be read; then `get` raises `SubscriptionClosed`."""
        if self._closed:
            return
        self._closed = True
        self._ready.set()
        self._on_close(self)


