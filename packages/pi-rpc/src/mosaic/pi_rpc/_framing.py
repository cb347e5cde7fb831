"""LF framing of Pi's RPC streams, sans-io: bytes in, records out; records in, bytes out.

The rules this file keeps (brief §1 "Engine output is split on LF only"; FACTS.md (b) "Framing";
P/dist/modes/rpc/jsonl.js 8-41):

1. A record ends at an LF byte (0x0A) and nowhere else. U+2028, U+2029, U+0085, VT, FF, FS/GS/RS and a
   lone CR are ordinary bytes inside a record: Pi's ``JSON.stringify`` leaves U+2028/U+2029 raw inside
   strings, so any splitter that knows more line ends than LF (``str.splitlines()``, a text-mode stream
   with universal newlines, Node's readline) cuts a record in two. That is the brief's mutant 11 and
   fixture E2.
2. One trailing CR is stripped from a record (jsonl.js 21-23), so a CRLF writer is read correctly.
3. Each record is decoded as UTF-8 on its own, after the split: a multi-byte sequence split across two
   ``feed()`` calls is reassembled because decoding waits for the LF.
4. A record longer than the cap is an error, never a silent split: the decoder raises
   :class:`FramingError` at once (without waiting for the LF, so memory stays bounded) and is poisoned:
   every later ``feed()`` raises again. The cap is :data:`DEFAULT_MAX_RECORD_BYTES` unless the caller
   chooses another.
5. A write is exactly one JSON text plus LF (:func:`encode_record`). JSON escapes every control
   character inside strings, so the LF that ends the record is the only LF in it.

6. A record is one JSON object, decoded strictly (:func:`decode_record`): what the decoder cannot take, or
   takes but Pi could never have written, is an error of a named kind (:data:`UNREADABLE_OUTPUT`), never an
   exception of another type: nesting deeper than :data:`MAX_RECORD_DEPTH` (or than the interpreter's
   recursion limit: ``RecursionError``), a number a double cannot hold (``NaN``, ``Infinity``, ``1e400``,
   an integer past Python's digit limit or a double's range: ``JSON.stringify`` writes none of them),
   anything that is not JSON, and JSON that is not an object. A reader stops at the first such record.

Two decoding modes exist because the two ends of the pipe differ. Engine output (``errors="strict"``):
pinned Pi writes only well-formed UTF-8 (``JSON.stringify`` escapes lone surrogates), so a byte sequence
that is not UTF-8 means the stream is not Pi's and poisons the decoder. Engine input, as the fake engine
reads it (``errors="replace"``): Pi decodes stdin with a StringDecoder, which substitutes U+FFFD, and
delivers an unterminated last line at end of input (jsonl.js 34-40); :meth:`RecordDecoder.close` returns
that tail.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "MAX_RECORD_DEPTH",
    "UNREADABLE_OUTPUT",
    "FramingError",
    "RecordDecoder",
    "UnreadableKind",
    "decode_record",
    "encode_record",
    "js_json_dumps",
]

# 64 MiB. A get_entries or get_tree answer carries the whole session in one line, and session files the
# reader accepts are at most 256 MiB (seed README, "Opening a file"); a caller that binds such a session
# passes a larger cap. The default keeps one runaway line from taking the controller's memory.
DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024

# Containers nested in one record (an object or array inside another counts one level). Far deeper than
# anything Pi writes on the paths a controller reads (a get_entries answer is about 8 levels plus an entry's
# own content), and far enough below the interpreter's recursion limit (1,000) that whoever takes the record
# next can walk or re-encode it recursively (json.dumps, a client's json.loads) without a RecursionError.
MAX_RECORD_DEPTH = 512

_LF = 0x0A

UnreadableKind = Literal[
    "record-too-large",  # longer than the decoder's cap (measured without its CR and LF)
    "not-utf-8",  # bytes that are not UTF-8 (strict mode)
    "not-json",  # not one JSON text (what JSON.parse refuses), or the decoder failed on it (MemoryError)
    "too-deep",  # nested deeper than MAX_RECORD_DEPTH, or than the interpreter's recursion limit
    "number-out-of-range",  # NaN, Infinity, a number beyond a double's range or Python's integer digit limit
    "not-an-object",  # JSON, but not an object: Pi's stdout carries only objects (output-guard.js 38-56)
]

UNREADABLE_OUTPUT: Mapping[str, str] = MappingProxyType({
    "record-too-large": "a record longer than the decoder's cap (the link's max_record_bytes), seen before its LF",
    "not-utf-8": "a record whose bytes are not UTF-8 (Pi writes only well-formed UTF-8)",
    "not-json": "a record that is not one JSON text, or one the JSON decoder failed on",
    "too-deep": f"a record nested deeper than {MAX_RECORD_DEPTH} levels (or than the interpreter's recursion "
                "limit)",
    "number-out-of-range": "a number JSON.stringify never writes: NaN, Infinity, one beyond a double's range, an "
                           "integer past Python's digit limit",
    "not-an-object": "a JSON value that is not an object",
})
"""Every kind of record the engine link cannot read (:class:`FramingError`'s ``kind``), with what it means:
the README's table, and the names a poisoned link's reason carries."""


class FramingError(Exception):
    """The byte stream can no longer be split into records, or a record cannot be read: ``kind`` (a key of
    :data:`UNREADABLE_OUTPUT`) says which. A :class:`RecordDecoder` that raised it is poisoned."""

    def __init__(self, message: str, kind: UnreadableKind = "not-json") -> None:
        super().__init__(message)
        self.kind: UnreadableKind = kind


class RecordDecoder:
    """Split a byte stream into LF-terminated records (sans-io).

    ``feed(data)`` returns the records completed by ``data``, in order, as ``str`` (one trailing CR
    stripped). Bytes after the last LF wait for the next ``feed``. ``close()`` ends the stream: it
    returns the unterminated tail (``None`` when there is none); the caller decides whether a tail is a
    record (Pi's stdin reader says yes) or a truncated one (engine output: Pi always ends a record with
    LF, so a tail means the engine died mid-write).

    Raises :class:`FramingError` when a record exceeds ``max_record_bytes`` (CR and LF not counted) or,
    with ``errors="strict"``, is not valid UTF-8; after that every call raises again.
    """

    def __init__(
        self,
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        errors: Literal["strict", "replace"] = "strict",
    ) -> None:
        if max_record_bytes < 1:
            raise ValueError("max_record_bytes must be positive")
        if errors not in ("strict", "replace"):
            raise ValueError("errors must be 'strict' or 'replace'")
        self.max_record_bytes = max_record_bytes
        self.errors: Literal["strict", "replace"] = errors
        self._buf = bytearray()
        # Bytes of _buf already searched for LF: a long record arriving in small pieces is scanned once.
        self._scanned = 0
        self._error: FramingError | None = None
        self._closed = False

    @property
    def poisoned(self) -> FramingError | None:
        """The error that poisoned the decoder, or ``None``."""
        return self._error

    @property
    def buffered(self) -> int:
        """Bytes held after the last LF (an incomplete record)."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[str]:
        """Add ``data``; return every record it completes. See the class docstring for failures."""
        if self._error is not None:
            raise self._error
        if self._closed:
            raise RuntimeError("RecordDecoder.feed() after close()")
        self._buf += data
        records: list[str] = []
        start = 0
        buf = self._buf
        scan = self._scanned
        while True:
            end = buf.find(_LF, scan)
            if end == -1:
                break
            records.append(self._decode(bytes(buf[start:end])))
            start = end + 1
            scan = start
        if start:
            del buf[:start]
            scan -= start
        self._scanned = len(buf)
        # A cap check before the LF arrives: a record may be at most max + 1 bytes here (its CR).
        if len(buf) > self.max_record_bytes + 1:
            self._fail(f"record exceeds {self.max_record_bytes} bytes without an LF", "record-too-large")
        return records

    def close(self) -> str | None:
        """End of stream: return the unterminated tail as a record (``None`` if there is none)."""
        if self._error is not None:
            raise self._error
        self._closed = True
        if not self._buf:
            return None
        tail = bytes(self._buf)
        self._buf.clear()
        self._scanned = 0
        return self._decode(tail)

    def _decode(self, raw: bytes) -> str:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if len(raw) > self.max_record_bytes:
            self._fail(f"record of {len(raw)} bytes exceeds the cap of {self.max_record_bytes}", "record-too-large")
        try:
            return raw.decode("utf-8", self.errors)
        except UnicodeDecodeError as exc:
            self._fail(f"record is not UTF-8 at byte {exc.start}: {exc.reason}", "not-utf-8")
            raise AssertionError("unreachable") from None

    def _fail(self, message: str, kind: UnreadableKind) -> None:
        self._error = FramingError(message, kind)
        self._buf.clear()
        raise self._error


# ---------------------------------------------------------------------------------------------------------
# Decoding one record strictly
# ---------------------------------------------------------------------------------------------------------


class _OutOfRange(ValueError):
    """Raised inside the JSON decoder by the number hooks; caught by decode_record."""


def _constant(name: str) -> Any:
    raise _OutOfRange(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange(f"the number {text[:40]} is beyond a double's range")
    return value


def _int(text: str) -> int:
    value = int(text)  # ValueError past sys.get_int_max_str_digits()
    if len(text) > 308:  # 10**308 and up: maybe more than a double holds (JSON.parse would make it Infinity)
        try:
            float(value)
        except OverflowError:
            raise _OutOfRange(f"an integer of {len(text)} digits is beyond a double's range") from None
    return value


# Built once; the C scanner keeps no state between calls. The hooks run only for numbers and the three
# constants, so a record of strings pays nothing for them.
_STRICT = json.JSONDecoder(parse_constant=_constant, parse_float=_float, parse_int=_int)


def _deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests more than ``limit`` containers (iterative: no recursion of its own)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if type(item) is dict else item
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
    return False


def decode_record(text: str) -> dict[str, Any]:
    """One engine record (its text, after :class:`RecordDecoder` split and decoded it) as a JSON object.

    Raises :class:`FramingError` with the record's ``kind`` (:data:`UNREADABLE_OUTPUT`) for anything else,
    and never another exception: ``not-json``, ``too-deep`` (over :data:`MAX_RECORD_DEPTH` levels, or a
    ``RecursionError`` in the decoder), ``number-out-of-range``, ``not-an-object``. Linear in the text; the
    depth walk runs only for a record with more than :data:`MAX_RECORD_DEPTH` brackets."""
    try:
        value = _STRICT.decode(text)
    except _OutOfRange as exc:
        raise FramingError(str(exc), "number-out-of-range") from None
    except RecursionError:
        raise FramingError("nested deeper than the interpreter's recursion limit", "too-deep") from None
    except json.JSONDecodeError as exc:
        raise FramingError(f"not JSON: {exc}", "not-json") from None
    except ValueError as exc:  # int() past the digit limit: the only other ValueError the decoder raises
        raise FramingError(str(exc)[:120], "number-out-of-range") from None
    except Exception as exc:  # noqa: BLE001 - MemoryError, or whatever else the decoder raises: unreadable
        raise FramingError(f"the JSON decoder failed: {type(exc).__name__}", "not-json") from None
    if not isinstance(value, dict):
        raise FramingError(f"a JSON {type(value).__name__} that is not an object", "not-an-object")
    if text.count("[") + text.count("{") > MAX_RECORD_DEPTH and _deeper_than(value, MAX_RECORD_DEPTH):
        raise FramingError(f"nested deeper than {MAX_RECORD_DEPTH} levels", "too-deep")
    return value


# ---------------------------------------------------------------------------------------------------------
# Encoding: JSON.stringify's bytes
# ---------------------------------------------------------------------------------------------------------

# Python keeps a lone surrogate as one code point; JSON.stringify (ES2019 well-formed stringify) writes it
# as a lowercase \udXXX escape. Paired surrogates never reach here: json.loads joins them.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _js_values(value: Any) -> Any:
    # JSON.stringify prints an integral number without ".0" and NaN/Infinity as null.
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 1e21:
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {k: _js_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_js_values(v) for v in value]
    return value


def _scalar(value: Any) -> str:
    return json.dumps(_js_values(value), ensure_ascii=False, allow_nan=False)


class _Text(str):
    """A piece of output already written (a bracket, a separator with its key) on :func:`_dumps_deep`'s stack."""


def _dumps_deep(value: Any) -> str:
    """:func:`json.dumps` with :func:`_js_values` and JSON.stringify's separators, without recursion: for a
    value nested deeper than the interpreter's recursion limit (the fake's ``get_tree`` answer of a long
    chain nests two levels per entry, as Pi's does up to V8's own stack limit)."""
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Text:
            parts.append(item)
        elif isinstance(item, Mapping):
            pairs = list(item.items())
            parts.append("{")
            stack.append(_Text("}"))
            for i in range(len(pairs) - 1, -1, -1):
                key, child = pairs[i]
                stack.append(child)
                name = key if isinstance(key, str) else _scalar(key).strip('"')
                stack.append(_Text(("," if i else "") + json.dumps(name, ensure_ascii=False) + ":"))
        elif isinstance(item, (list, tuple)):
            parts.append("[")
            stack.append(_Text("]"))
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append(_Text(","))
        else:
            parts.append(_scalar(item))
    return "".join(parts)


def js_json_dumps(value: Any) -> str:
    """``JSON.stringify(value)`` as Node writes it: no spaces, non-ASCII raw (U+2028/U+2029 included),
    control characters escaped as ``\\n``/``\\u001b`` etc., a lone surrogate as ``\\udXXX``, an integral
    float without a fraction, non-finite floats as ``null``. Key order is the mapping's order. A value
    nested deeper than the interpreter's recursion limit is written the same way, without recursion."""
    try:
        text = json.dumps(_js_values(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        text = _dumps_deep(value)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encode_record(value: Mapping[str, Any]) -> bytes:
    """One record on the wire: ``js_json_dumps(value)`` in UTF-8, then LF. The result holds exactly one
    LF, at the end (JSON escapes LF inside strings)."""
    if not isinstance(value, Mapping):
        raise TypeError("a record is a JSON object")
    return js_json_dumps(value).encode("utf-8") + b"\n"
