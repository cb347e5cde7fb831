"""For this package's tests and its reviewers, with no compatibility promise (any release may change or drop
a name here; the package's promised names are its other public modules'): the switches for mechanisms no
result shows, and the machinery only the tests walk.

The switches: which path made a part, where parts and results are serialized, and the server's head timeout.

- `general_parts_path()`: inside the block every item takes the general path to its parts (the one-step
  path for short items is off), so a test can hold the two paths to the same output;
- `part_encodes()`: the parts encoded inside the block (each part is serialized once, when it is made);
- `json_encodes()`: the values `dumps` and `dump_bytes` encode inside the block (a page's parts are spliced
  in as the bytes they were made as, never encoded again);
- `header_timeout(seconds)`: the time a connection has to send its whole request head, inside the block
  (`mosaic.chat_pages.server.HEADER_TIMEOUT` outside it), so a test of the slow and idle clients the server
  drops need not wait 10 s.

Each changes module state for the whole process while its block runs: use it from one thread, in a test.

The machinery: how an item becomes parts and a long string fragments (`fragments(text)`: never inside a
surrogate pair; `sized_parts(item)` and `encoded_parts(item)`: an item's parts with their serialized sizes
or bytes; `part_from_json(raw)`: a kept part read back; `json_part(item_json)`: the one part spliced from the
JSON pieces pi-format cuts from an entry's line, with its follow-digest key, or None); the lanes reader calls run on (`Lanes`, and
`lane_of(target)`, the conversation a target asks for); `RACY_NS`, how much older than a verification a
file's ctime must be for the re-verification shortcut to skip hashing the pinned prefix again (git's
racily-clean rule; README "Snapshots, epochs, cursors"); the guard's `loopback_hosts(address, port)` (the
Hosts it accepts) and `split_token(target)` (the target without its token); a seat's `sessions_rel(seat)`
and `receipts_rel(seat)` below its project root and `same_path(a, b)` (the samePath rule registrations are
matched by: both absolute and equal after `os.path.realpath`; a missing path compares as written); and
`SERVE_SWITCH_INTERVAL`, the GIL hand-over interval `mosaic-read serve` sets for its process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from . import _jsonout, _parts, _server
from ._cli import SERVE_SWITCH_INTERVAL
from ._guard import loopback_hosts, split_token
from ._lanes import Lanes, lane_of
from ._parts import encoded_parts, fragments, part_from_json, sized_parts
from ._rawparts import json_part
from ._snapshots import RACY_NS
from ._sources import receipts_rel, same_path, sessions_rel

__all__ = [
    "RACY_NS",
    "SERVE_SWITCH_INTERVAL",
    "Lanes",
    "encoded_parts",
    "fragments",
    "general_parts_path",
    "header_timeout",
    "json_encodes",
    "json_part",
    "lane_of",
    "loopback_hosts",
    "part_encodes",
    "part_from_json",
    "receipts_rel",
    "same_path",
    "sessions_rel",
    "sized_parts",
    "split_token",
]


@contextlib.contextmanager
def general_parts_path() -> Iterator[None]:
    """Every item inside the block goes through the general path to its parts."""
    real = _parts._single_part
    _parts._single_part = lambda item: None
    try:
        yield
    finally:
        _parts._single_part = real


@contextlib.contextmanager
def part_encodes() -> Iterator[list[Any]]:
    """Yield a list that collects every part encoded inside the block."""
    encoded: list[Any] = []
    real = _parts._encode

    def counting(part: dict[str, Any]) -> bytes:
        encoded.append(part)
        return real(part)

    _parts._encode = counting
    try:
        yield encoded
    finally:
        _parts._encode = real


@contextlib.contextmanager
def json_encodes() -> Iterator[list[Any]]:
    """Yield a list that collects every value the encoder behind `dumps` and `dump_bytes` encodes inside the
    block."""
    encoded: list[Any] = []
    real = _jsonout._ENCODER

    class Counting:
        def encode(self, value: Any) -> str:
            encoded.append(value)
            return real.encode(value)

    _jsonout._ENCODER = Counting()  # type: ignore[assignment]
    try:
        yield encoded
    finally:
        _jsonout._ENCODER = real


@contextlib.contextmanager
def header_timeout(seconds: float) -> Iterator[None]:
    """Inside the block, a server started or serving drops a connection whose request head has not all
    arrived within `seconds`."""
    real = _server.HEADER_TIMEOUT
    _server.HEADER_TIMEOUT = seconds
    try:
        yield
    finally:
        _server.HEADER_TIMEOUT = real


def __dir__() -> list[str]:
    return sorted(__all__)
