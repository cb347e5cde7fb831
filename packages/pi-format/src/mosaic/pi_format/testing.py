"""Test switches for the line index's mechanisms: what a parse cannot show from outside, pinned by tests.

A parse reads each line as far as the tree needs with msgspec and sends a line to the exact decoder
(Python's json with NaN and Infinity refused, what JSON.parse accepts) only where msgspec could judge it
differently; the id table switches to a compact form once the records are dense; a page renders only the
entries it returns. The results never show which path ran, so the tests that hold each path to the others
use these:

- `exact_only()`: every line through the exact decoder, at parse time and at render time, with no quick
  verdict on a line msgspec refuses (the parser as it was before the index: the reference);
- `exact_decodes()`: the texts the exact decoder reads inside the block;
- `head_decodes()`: the lines the head decoder (msgspec, four fields) reads inside the block;
- `compact_form()` and `sparse_form()`: every parse inside the block in that id-table form from its first
  record; `id_table_form(parsed)` says which form a result's table is in; `narrow_id_table(max_slots)`:
  the compact table's slots widen to 8-byte items past this (not 2**31), and `id_table_widths(parsed)` says
  the typecodes (hashes, slots) of a result's compact table; `colliding_hashes()`: every string hashes
  alike in the compact table; `id_table_held(parsed)`: how many ids the compact table keeps as strs;
- `rendered_lines()`: the file lines of the entries rendered inside the block;
- `count_entry_reads(branch)`: from then on, how many times any walk of the branch's result looks at an
  entry of the shared tree (what a page costs, counted rather than timed);
- `EXACT_DECODER`, `UTF8_BLOCK` (the bytes of lines checked for UTF-8 at once) and `long_digit_runs` (the
  search for integers longer than Python's digit limit, which msgspec would skip);
- `canonical_span`, `canonical_value`, `ASSISTANT_STR_ATTRS`, `VIEW_BYTES` and `HIDDEN_TYPES`: the raw render's
  own proofs (a line's escapes are canonical; a value is what a compact encoder writes), the attributes an
  assistant item shows, the length past which a text is given as a view and the entry types that make no item, for a benchmark that bounds the reader by the
  rules it must apply (chat-pages' "required" floors).

Each switch changes module state for the whole process while its block runs: use it from one thread, in a
test. Importing this module loads the parser (and msgspec).

These are for this package's tests and its reviewers, with no compatibility promise: any release may change
or drop a switch (they are not counted in the package's public names).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any, Literal, NoReturn, cast

import msgspec

from . import _idtable, _lines, _rawrender, _tree
from ._lines import DECODER as EXACT_DECODER
from ._lines import LONG_LINE, UTF8_BLOCK
from ._lines import _long_digit_runs as long_digit_runs
from ._model import Branch, Item, Parsed
from ._rawrender import VIEW_BYTES, canonical_span, canonical_value
from ._render import ASSISTANT_STR_ATTRS, HIDDEN_TYPES

__all__ = [
    "ASSISTANT_STR_ATTRS",
    "EXACT_DECODER",
    "HIDDEN_TYPES",
    "LONG_LINE",
    "UTF8_BLOCK",
    "VIEW_BYTES",
    "EntryReads",
    "canonical_span",
    "canonical_value",
    "colliding_hashes",
    "compact_form",
    "count_entry_reads",
    "exact_decodes",
    "exact_only",
    "head_decodes",
    "id_table_form",
    "id_table_held",
    "id_table_widths",
    "long_digit_runs",
    "narrow_id_table",
    "render_reads",
    "rendered_lines",
    "sparse_form",
]


# The globals the parse reads at call time. `DENSE_BYTES` (from _idtable) and `render_entry` (from _render)
# are names those modules import, so they are set in the importing module's namespace, where they are read.
_LINES: dict[str, Any] = vars(_lines)
_TREE: dict[str, Any] = vars(_tree)


def _refuse(_: object) -> NoReturn:
    raise msgspec.DecodeError("the reference reads every line with the exact decoder")


@contextlib.contextmanager
def exact_only() -> Iterator[None]:
    """Every line through the exact decoder inside the block, at parse time and at render time, and no
    quick verdict on a line msgspec refuses: the reference a parse through the index must equal."""
    saved = _lines._FAST, _lines._FULL, _lines._QUICK
    _lines._FAST = _lines._FULL = _refuse
    _lines._QUICK = False
    try:
        yield
    finally:
        _lines._FAST, _lines._FULL, _lines._QUICK = saved


@contextlib.contextmanager
def exact_decodes() -> Iterator[list[str]]:
    """Yield a list that collects every text the exact decoder reads inside the block (a line's UTF-8 text;
    line 1, the header, is always among them)."""
    calls: list[str] = []
    real = _lines.DECODER

    class Counting(json.JSONDecoder):
        def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
            calls.append(s)
            return real.decode(s)

    _lines.DECODER = Counting()
    try:
        yield calls
    finally:
        _lines.DECODER = real


@contextlib.contextmanager
def head_decodes() -> Iterator[list[bytes]]:
    """Yield a list that collects every line (its bytes) the head decoder reads at parse time inside the
    block: a line judged by its bytes alone is not among them."""
    calls: list[bytes] = []
    real = _lines._FAST

    def counting(raw: Any) -> Any:
        calls.append(bytes(raw))
        return real(raw)

    _lines._FAST = counting
    try:
        yield calls
    finally:
        _lines._FAST = real


@contextlib.contextmanager
def render_reads() -> Iterator[list[int]]:
    """Yield a list that collects the length of every line `Parsed.render_json` reads itself inside the block
    (a line the line index read with its render's fields, `LONG_LINE` bytes or more, is not among them)."""
    calls: list[int] = []
    saved = _rawrender._DECODE, _rawrender._DECODE_RAW

    def counting(real: Any) -> Any:
        def read(view: Any) -> Any:
            calls.append(len(view))
            return real(view)

        return read

    _rawrender._DECODE, _rawrender._DECODE_RAW = counting(saved[0]), counting(saved[1])
    try:
        yield calls
    finally:
        _rawrender._DECODE, _rawrender._DECODE_RAW = saved


@contextlib.contextmanager
def compact_form() -> Iterator[None]:
    """Every parse inside the block keeps its raw ids in the compact table from its first record."""
    saved = _LINES["_CHECK_EVERY"], _LINES["DENSE_BYTES"]
    _LINES["_CHECK_EVERY"], _LINES["DENSE_BYTES"] = 1, 1 << 40
    try:
        yield
    finally:
        _LINES["_CHECK_EVERY"], _LINES["DENSE_BYTES"] = saved


@contextlib.contextmanager
def sparse_form() -> Iterator[None]:
    """Every parse inside the block keeps its raw ids in the sparse table (a dict), however dense."""
    saved = _LINES["DENSE_BYTES"]
    _LINES["DENSE_BYTES"] = 0
    try:
        yield
    finally:
        _LINES["DENSE_BYTES"] = saved


@contextlib.contextmanager
def narrow_id_table(max_slots: int) -> Iterator[None]:
    """Inside the block the compact id table widens its slots to 8-byte items past a table of `max_slots`
    (the limit of 4-byte items, lowered so a test reaches it)."""
    saved = _idtable._MAX_SLOT
    _idtable._MAX_SLOT = max_slots
    try:
        yield
    finally:
        _idtable._MAX_SLOT = saved


@contextlib.contextmanager
def colliding_hashes() -> Iterator[None]:
    """Inside the block the compact id table hashes every string to the same value: every lookup meets
    every other string (a table of collisions, read by comparing the strings themselves)."""
    saved = _idtable._HASH
    _idtable._HASH = lambda _: 0x5EED
    try:
        yield
    finally:
        _idtable._HASH = saved


def id_table_widths(parsed: Parsed) -> tuple[str, str]:
    """The typecodes of the compact id table behind `parsed`: (hashes, slots)."""
    ids = parsed._state.forest.ix.ids  # type: ignore[attr-defined]
    return ids._hash.typecode, _idtable.slots_typecode(ids._slots)


def id_table_held(parsed: Parsed) -> int:
    """How many strings the compact id table behind `parsed` keeps as strs (the ids of long lines); the
    others it reads again from their lines."""
    held: int = len(parsed._state.forest.ix.ids._held)  # type: ignore[attr-defined]
    return held


def id_table_form(parsed: Parsed) -> Literal["compact", "sparse"]:
    """Which form the id table behind `parsed` is in."""
    compact: bool = parsed._state.forest.ix.ids.compact_form  # type: ignore[attr-defined]
    return "compact" if compact else "sparse"


@contextlib.contextmanager
def rendered_lines() -> Iterator[list[int]]:
    """Yield a list that collects the file line of every entry rendered inside the block (a notice is not
    rendered from a line and is not listed)."""
    lines: list[int] = []
    real = _TREE["render_entry"]

    def counting(obj: dict[str, Any], raw_id: str, line: int) -> Item | None:
        lines.append(line)
        item: Item | None = real(obj, raw_id, line)
        return item

    _TREE["render_entry"] = counting
    try:
        yield lines
    finally:
        _TREE["render_entry"] = real


class EntryReads(bytearray):
    """The shared tree's per-entry flags, counting each look at them in `reads` (set it to 0 to restart)."""

    reads = 0

    def __getitem__(self, i: Any) -> Any:
        self.reads += 1
        return super().__getitem__(i)


def count_entry_reads(branch: Branch) -> EntryReads:
    """Count, from now on, every look a walk of `branch`'s result (any of its branches) takes at an entry of
    the shared tree; returns the counter. It stays in place for the life of the result."""
    forest = cast(_tree.Forest, branch._forest)  # the one kind of tree a parse makes
    counter = EntryReads(forest.flags)
    forest.flags = counter
    return counter


def __dir__() -> list[str]:
    return sorted(__all__)
