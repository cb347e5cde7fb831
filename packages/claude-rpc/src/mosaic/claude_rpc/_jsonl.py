"""stream-json framing, strict: LF-delimited JSON objects in, one JSON object per LF-terminated line out.

Kept in one module so it can later be unified with pi-rpc's framing (the same rules, written for Claude's
stream here). :class:`LineDecoder` is sans-io: :meth:`LineDecoder.feed` takes the bytes read and returns,
in order, each complete line's decoded object, or one :class:`Undecodable` for the first line it cannot
take, after which it is poisoned: every later call returns nothing. It never raises for bad input and
never waits: a line longer than the cap is refused as soon as the cap is passed, before its LF arrives.

What a line must be (the engine writes each message with ``JSON.stringify`` and one LF), and the reason
named when it is not:

===================  ======================================================================================
reason               the line
===================  ======================================================================================
``line-too-long``    is longer than ``max_line_bytes`` (its LF not yet seen, or seen)
``not-utf8``         is not well-formed UTF-8
``not-json``         is not one JSON text (``NaN``/``Infinity`` literals included: ``JSON.stringify`` never
                     writes them); an empty line too
``too-deep``         nests arrays and objects deeper than ``max_depth``
``number-out-of-range``  holds a number that is not a finite double (``1e400``, a 400-digit integer):
                     ``JSON.parse`` would read it as ``Infinity``, which ``JSON.stringify`` cannot write
``duplicate-key``    has an object with the same key twice (``JSON.stringify`` cannot write that either)
``not-an-object``    is valid JSON but not an object with a string ``type``
``truncated``        (only from :meth:`LineDecoder.close`) bytes after the last LF when the output ended
===================  ======================================================================================

A record splits at LF bytes only: U+2028, U+2029, U+0085, a lone CR and every other control character stay
inside the line (the JSON decoder then refuses a raw control character inside a string). The cost of a
feed is linear in the bytes fed: the scan for LF resumes where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_LINE_BYTES",
    "LineDecoder",
    "UndecodableReason",
    "Undecodable",
    "decode_line",
    "encode_line",
]

# A whole initialize answer is about 16 KiB and a tool result can carry a file; 64 MiB bounds memory, as
# pi-rpc's framing does.
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
# The deepest message seen from the binary nests under 12 levels; a tool input from the model can nest more.
# Python's own parser would raise RecursionError near 1000: the limit is checked well below it.
DEFAULT_MAX_DEPTH = 200

UndecodableReason = Literal["line-too-long", "not-utf8", "not-json", "too-deep", "number-out-of-range",
                            "duplicate-key", "not-an-object", "truncated"]


@dataclass(frozen=True)
class Undecodable:
    """A line the decoder cannot take: ``reason`` (a code of the table above), ``detail`` for a person,
    ``size`` the line's bytes so far."""

    reason: UndecodableReason
    detail: str
    size: int


class _Refused(Exception):
    def __init__(self, reason: UndecodableReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _constant(name: str) -> Any:
    raise _Refused("not-json", f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused("number-out-of-range", f"the number {text[:40]} is not a finite double")
    return value


def _int(text: str) -> int:
    try:
        value = int(text)
        float(value)
    except (ValueError, OverflowError):  # over 4300 digits, or beyond the largest double
        raise _Refused("number-out-of-range", f"the integer {text[:40]}... is not a finite double") from None
    return value


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused("duplicate-key", f"the key {key[:40]!r} appears twice in one object")
            seen.add(key)
    return out


def _depth_ok(value: Any, limit: int) -> bool:
    """Iteratively: no container nested deeper than ``limit`` (the top-level object is depth 1)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return True


def decode_line(line: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any] | Undecodable:
    """One line (without its LF) as a JSON object with a string ``type``, or the :class:`Undecodable` that
    says why not. Never raises for bad input."""
    size = len(line)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Undecodable("not-utf8", f"not UTF-8 at byte {exc.start}", size)
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int,
                           object_pairs_hook=_pairs)
    except _Refused as exc:
        return Undecodable(exc.reason, exc.detail, size)
    except RecursionError:
        return Undecodable("too-deep", f"nested deeper than {max_depth}", size)
    except ValueError as exc:
        return Undecodable("not-json", str(exc)[:200], size)
    if not _depth_ok(value, max_depth):
        return Undecodable("too-deep", f"nested deeper than {max_depth}", size)
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return Undecodable("not-an-object", "not a JSON object with a string 'type'", size)
    return value


class LineDecoder:
    """LF framing plus :func:`decode_line`, strict (module docstring). Poisoned after the first
    :class:`Undecodable`: its result is the last thing it returns."""

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        if max_line_bytes < 1 or max_depth < 1:
            raise ValueError("max_line_bytes and max_depth must be positive")
        self.max_line_bytes = max_line_bytes
        self.max_depth = max_depth
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already known to hold no LF
        self._failed: Undecodable | None = None

    @property
    def failed(self) -> Undecodable | None:
        """The line that poisoned the decoder, or ``None``."""
        return self._failed

    @property
    def pending(self) -> int:
        """Bytes held after the last LF."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[dict[str, Any] | Undecodable]:
        """The complete lines in ``data`` (after what was held), decoded, in order; at most one
        :class:`Undecodable`, always last."""
        if self._failed is not None:
            return []
        buf = self._buf
        buf += data
        out: list[dict[str, Any] | Undecodable] = []
        start = 0
        while True:
            end = buf.find(b"\n", max(start, self._scanned))
            if end < 0:
                self._scanned = len(buf)
                if len(buf) - start > self.max_line_bytes:
                    return self._fail(out, Undecodable(
                        "line-too-long", f"over {self.max_line_bytes} bytes without a line end", len(buf) - start))
                break
            if end - start > self.max_line_bytes:
                return self._fail(out, Undecodable("line-too-long", f"a line of {end - start} bytes", end - start))
            item = decode_line(bytes(buf[start:end]), max_depth=self.max_depth)
            start = end + 1
            self._scanned = start
            out.append(item)
            if isinstance(item, Undecodable):
                return self._fail(out[:-1], item)
        del buf[:start]
        self._scanned -= start
        return out

    def close(self) -> Undecodable | None:
        """The output ended: ``truncated`` when bytes after the last LF are held (they are not decoded),
        else ``None``. The decoder takes nothing more."""
        held = len(self._buf)
        self._buf.clear()
        self._scanned = 0
        if self._failed is None:
            self._failed = Undecodable("truncated", "the output ended inside a line", held)
            return self._failed if held else None
        return None

    def _fail(self, out: list[dict[str, Any] | Undecodable], bad: Undecodable) -> list[dict[str, Any] | Undecodable]:
        self._failed = bad
        self._buf.clear()
        self._scanned = 0
        out.append(bad)
        return out


def encode_line(obj: Mapping[str, Any]) -> bytes:
    """One LF-terminated line for the engine's stdin: compact JSON with every non-ASCII character escaped
    (``JSON.parse`` reads the escapes back to the same string; a lone surrogate survives, which raw UTF-8
    could not carry). Raises ``ValueError`` for a value JSON cannot hold (NaN, infinities)."""
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"
