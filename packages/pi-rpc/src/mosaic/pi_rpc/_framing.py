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
from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "FramingError",
    "RecordDecoder",
    "encode_record",
    "js_json_dumps",
]

# 64 MiB. A get_entries or get_tree answer carries the whole session in one line, and session files the
# reader accepts are at most 256 MiB (seed README, "Opening a file"); a caller that binds such a session
# passes a larger cap. The default keeps one runaway line from taking the controller's memory.
DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024

_LF = 0x0A


class FramingError(Exception):
    """The byte stream can no longer be split into records: a record over the cap, or (strict mode) a
    record that is not UTF-8. The decoder that raised it is poisoned."""


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
            self._fail(f"record exceeds {self.max_record_bytes} bytes without an LF")
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
            self._fail(f"record of {len(raw)} bytes exceeds the cap of {self.max_record_bytes}")
        try:
            return raw.decode("utf-8", self.errors)
        except UnicodeDecodeError as exc:
            self._fail(f"record is not UTF-8 at byte {exc.start}: {exc.reason}")
            raise AssertionError("unreachable") from None

    def _fail(self, message: str) -> None:
        self._error = FramingError(message)
        self._buf.clear()
        raise self._error


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


def js_json_dumps(value: Any) -> str:
    """``JSON.stringify(value)`` as Node writes it: no spaces, non-ASCII raw (U+2028/U+2029 included),
    control characters escaped as ``\\n``/``\\u001b`` etc., a lone surrogate as ``\\udXXX``, an integral
    float without a fraction, non-finite floats as ``null``. Key order is the mapping's order."""
    text = json.dumps(_js_values(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encode_record(value: Mapping[str, Any]) -> bytes:
    """One record on the wire: ``js_json_dumps(value)`` in UTF-8, then LF. The result holds exactly one
    LF, at the end (JSON escapes LF inside strings)."""
    if not isinstance(value, Mapping):
        raise TypeError("a record is a JSON object")
    return js_json_dumps(value).encode("utf-8") + b"\n"
