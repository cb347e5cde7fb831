"""Serialising pages as JSON whose UTF-8 is always valid, even with lone surrogates in strings; and the
ISO 8601 form of the times the reader returns.

Pi writes JSON from JavaScript strings, which may hold lone surrogates (a `\\udXXX` escape with no partner);
Python's json carries them into `str` as lone code points, and `str.encode("utf-8")` would raise on them.
`dumps` writes every other character raw (ensure_ascii=False) and writes each lone surrogate as its JSON
escape, which is exactly what JSON.stringify does for well-formed output. Inside JSON text a surrogate code
point can occur only inside a string literal, so replacing it with its escape keeps the text valid.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

# What the public modules show of this module; the rest is the package's own.
__all__ = ["dump_bytes", "dumps"]

_LONE = re.compile("[\ud800-\udfff]")
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps(value: Any) -> str:
    """Compact JSON text of `value` with lone surrogates escaped; its UTF-8 encoding never fails."""
    if _holds_encoded(value, 2):
        return dump_bytes(value).decode("utf-8")
    text = _ENCODER.encode(value)
    return _LONE.sub(_escape, text) if _LONE.search(text) else text


def value_text(value: Any) -> str:
    """`dumps(value)` for a JSON value that holds no page parts (a toolCall's arguments): no look for the
    parts' bytes first."""
    text = _ENCODER.encode(value)
    return _LONE.sub(_escape, text) if _LONE.search(text) else text


def dump_bytes(value: Any) -> bytes:
    """`dumps(value)` as UTF-8: the bytes the page limits count ("8 MiB of serialized UTF-8").

    A page's parts (`_parts.PageParts`, in a result or a page, up to two dicts deep) carry their JSON
    bytes, made once when the parts were made: they are joined here, never encoded again. The
    bytes are the same as encoding the whole value: compact JSON is `{` + `key:value` joined by `,` + `}`.
    """
    if _holds_encoded(value, 2):
        out: list[bytes] = []
        _spliced(value, 2, out)
        return b"".join(out)  # the one copy: every piece, the parts' bytes included, joined once
    return _plain(value)


def _plain(value: Any) -> bytes:
    text = _ENCODER.encode(value)
    try:
        # Encoding fails exactly when the text holds a lone surrogate (Python's UTF-8 codec refuses one):
        # only then is it searched and escaped (a search of a long text costs more than its encoding).
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE.sub(_escape, text).encode("utf-8")


def _key(key: str) -> bytes:
    raw = _KEYS.get(key)
    if raw is None:
        raw = _plain(key) + b":"
        if len(_KEYS) < 256:
            _KEYS[key] = raw
    return raw


_KEYS: dict[str, bytes] = {}


def _spliced(value: dict[str, Any], depth: int, out: list[bytes]) -> None:
    """Append the pieces of `value`'s JSON to `out`: its own punctuation and keys, and each page's parts as the
    bytes they carry (`PageParts.json_pieces`), never copied or encoded again here."""
    sep = b"{"
    for k, v in value.items():
        out.append(sep)
        sep = b","
        out.append(_key(k))
        pieces = getattr(v, "json_pieces", None) if isinstance(v, list) else None
        if pieces is not None and pieces(out):
            continue
        if depth > 1 and _holds_encoded(v, depth - 1):
            _spliced(v, depth - 1, out)
        else:
            out.append(_plain(v))
    out.append(b"{}" if sep == b"{" else b"}")


def _holds_encoded(value: Any, depth: int) -> bool:
    """Whether `value` is a dict with str keys holding, up to `depth` dicts deep, a list that carries its
    JSON bytes (`json_pieces`)."""
    if type(value) is not dict:
        return False
    for k, v in value.items():
        if type(k) is not str:
            return False
        if isinstance(v, list):
            if callable(getattr(v, "json_pieces", None)):
                return True
        elif depth > 1 and type(v) is dict and _holds_encoded(v, depth - 1):
            return True
    return False


def json_size(value: Any) -> int:
    """The length in bytes of `dump_bytes(value)`."""
    return len(dump_bytes(value))


def utf16_units(text: str) -> int:
    """The length of `text` in UTF-16 code units, as JavaScript counts characters.

    An astral character is two units; a lone surrogate is one.
    """
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def iso_time(seconds: float) -> str:
    """`seconds` since the epoch (a clock reading, the project's one convention) as an ISO 8601 UTC time
    with milliseconds and a `Z`, the form of generatedAt, modifiedAt and expiresAt. Pure."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
