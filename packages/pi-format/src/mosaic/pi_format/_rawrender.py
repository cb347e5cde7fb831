"""An entry's item as JSON pieces cut from its line's bytes, without decoding its strings (issue 34).

`render_json(buf, a, b, raw_id, line)` reads the line `buf[a:b]` with msgspec into structs whose fields are
`msgspec.Raw` (each field's exact JSON bytes from the line, not decoded) and applies `_render.py`'s rules to
those bytes: which entry types and roles show, which fields become blocks and attributes, and the type of
each field (read from the first byte of its JSON: a wrong-typed field is an absent attribute or an
unsupported block, as `render_entry` makes it). The result (`ItemJson`) holds, for every value of
`render_entry(...).to_json()`, exactly the JSON bytes a compact encoder writes for it (msgspec's, or Python's
json with ensure_ascii=False: the same bytes for these values), so a caller that splices them gets the bytes
it would get by rendering the item and encoding it.

That holds only where the line's bytes are already those bytes. A string is spliced only when its JSON
token is canonical (`canonical_string`): every escape one of the escapes `JSON.stringify`, msgspec and
Python's json all write (`\\"`, `\\\\`, `\\b`, `\\f`, `\\n`, `\\r`, `\\t`, and `\\u00xx` in lowercase for the other
control characters), nothing else escaped. Pi writes its files with `JSON.stringify`, so its strings are
canonical. An integer attribute is spliced only as 1 to 18 digits (not `-0`); a toolCall's arguments only
when msgspec writes back exactly the bytes it read and every float in them reads back as its own text
(`canonical_value`). Anything else returns None and the caller renders the entry (`render_entry`): a
non-canonical escape (`\\/`, `\\u00e9`, uppercase hex, a surrogate pair), an entry type or role that is not
one of the known tokens byte for byte, an unknown type or role (a notice), a hidden entry, a content that
is neither a list, a string nor null, a block that is not an object, a line msgspec refuses. The fast path
has no rules of its own beyond reading types from bytes: `tests/test_raw_render.py` holds it, entry by entry,
to `render_entry` (every fixture, generated sessions, hostile shapes, Hypothesis).

Only lines the line index read with msgspec (not `KEPT`) come here: they are valid UTF-8 (`decode_lines`
checked them) and msgspec accepted them, so a spliced token is valid UTF-8 and holds no lone surrogate.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ._ids import NATIVE_PREFIX, safe_id
from ._model import ItemJson
from ._render import ASSISTANT_STR_ATTRS, BASH_BOOL_ATTRS, TYPE_NAME_MAX

__all__: list[str] = []

_R = msgspec.Raw
_ABSENT = msgspec.Raw()


class _Block(msgspec.Struct, gc=False):
    type: _R = _ABSENT
    text: _R = _ABSENT
    thinking: _R = _ABSENT
    redacted: _R = _ABSENT
    id: _R = _ABSENT
    name: _R = _ABSENT
    arguments: _R = _ABSENT
    mimeType: _R = _ABSENT  # noqa: N815 (the JSON key)


class _Message(msgspec.Struct, gc=False):
    role: _R = _ABSENT
    content: list[_Block] | None = None
    stopReason: _R = _ABSENT  # noqa: N815
    errorMessage: _R = _ABSENT  # noqa: N815
    provider: _R = _ABSENT
    model: _R = _ABSENT
    api: _R = _ABSENT
    toolCallId: _R = _ABSENT  # noqa: N815
    toolName: _R = _ABSENT  # noqa: N815
    isError: _R = _ABSENT  # noqa: N815
    command: _R = _ABSENT
    output: _R = _ABSENT
    exitCode: _R = _ABSENT  # noqa: N815
    cancelled: _R = _ABSENT
    truncated: _R = _ABSENT
    excludeFromContext: _R = _ABSENT  # noqa: N815


class _Entry(msgspec.Struct, gc=False):
    type: _R = _ABSENT
    timestamp: _R = _ABSENT
    message: _Message | None = None
    display: _R = _ABSENT
    customType: _R = _ABSENT  # noqa: N815
    content: list[_Block] | None = None
    summary: _R = _ABSENT
    tokensBefore: _R = _ABSENT  # noqa: N815
    firstKeptEntryId: _R = _ABSENT  # noqa: N815
    fromId: _R = _ABSENT  # noqa: N815


# The same fields with `content` as its raw JSON: a line whose content is a string (or of a wrong type),
# which the list decoder refuses (a ValidationError), is read again with these.
class _MessageRaw(_Message, gc=False):
    content: _R = _ABSENT  # type: ignore[assignment]


class _EntryRaw(_Entry, gc=False):
    message: _MessageRaw | None = None
    content: _R = _ABSENT  # type: ignore[assignment]


class _LongEntry(_Entry, gc=False):
    """`_Entry` with the line index's two fields of its own: a long line is read once, for the index and for
    its render together (`decode_long`)."""

    id: _R = _ABSENT
    parentId: _R = _ABSENT  # noqa: N815 (the JSON key)


_DECODE = msgspec.json.Decoder(_Entry).decode
_DECODE_LONG = msgspec.json.Decoder(_LongEntry).decode
_DECODE_RAW = msgspec.json.Decoder(_EntryRaw).decode
_ENCODE = msgspec.json.encode

# A backslash that starts an escape other than the canonical ones (module doc), in JSON whose escaped
# backslashes (`\\\\` pairs, taken left to right as JSON reads them) are removed first; and the quick look for one
# that needs no copy: a backslash followed by a byte that starts no canonical escape, or a \\u escape that is not
# a canonical one. The quick look also finds the second backslash of a `\\\\` pair followed by such a byte (a
# literal backslash before "/" or "u", say): such JSON takes the exact look.
_BAD_ESCAPE = re.compile(rb'\\(?![nrtbf"]|u00(?:0[0-7bef]|1[0-9a-f]))')
_MAYBE_BAD = re.compile(rb'\\(?:[^nrtbf"\\u]|u(?!00(?:0[0-7bef]|1[0-9a-f])))')
_INT = re.compile(rb"-?[1-9][0-9]{0,17}|0")

_NULL = b"null"
_TRUE = b"true"
_FALSE = b"false"
_QUOTE = 0x22  # "
_EMPTY = b'""'


def canonical_string(tok: bytes) -> bool:
    """Whether the JSON `tok` (valid JSON: a string token, or a whole line) holds only canonical escapes, so
    that each of its string tokens is exactly what a compact encoder writes for the string it holds."""
    if b"\\\\" in tok:
        tok = tok.replace(b"\\\\", b"")
    return _BAD_ESCAPE.search(tok) is None


#: `canonical_span` judges a long line a window of this many bytes at a time (issue 34: a copy of a 20 MB line
#: and a second one without its escaped backslashes were held beside the file).
_WINDOW = 1 << 20


def canonical_span(buf: bytes, a: int, b: int) -> bool:
    """`canonical_string(buf[a:b])`, copying nothing when no backslash there can start a bad escape, and at
    most a window of it at a time otherwise (each window ends where no escape is split)."""
    at = buf.find(b"\\", a, b)
    if at < 0 or _MAYBE_BAD.search(buf, at, b) is None:
        return True
    while b - a > _WINDOW:
        cut = _escape_boundary(buf, a, a + _WINDOW)
        if not canonical_string(buf[a:cut]):
            return False
        a = cut
    return canonical_string(buf[a:b])


def _escape_boundary(buf: bytes, a: int, cut: int) -> int:
    """A place at or before `cut` (and past `a`, where an escape may start) that splits no escape: `cut`
    itself when no backslash is in the 5 bytes before it (an escape is at most 6 bytes), else the start of
    the run of backslashes that backslash ends (no escape but `\\\\` holds a backslash past its first byte,
    so a run starts an escape), or, for a run from `a` on, an even number of its bytes (whole pairs)."""
    q = buf.rfind(b"\\", cut - 5, cut)
    if q < 0:
        return cut
    end, step = q + 1, 16
    while True:  # the run's start, looked for in growing steps (the cost is the run's length)
        lo = max(a, end - step)
        kept = len(buf[lo:end].rstrip(b"\\"))
        if kept or lo == a:
            start = lo + kept
            break
        end, step = lo, step * 4
    return start if start > a else a + (q + 1 - a) // 2 * 2


def _check_float(text: str) -> float:
    value = float(text)
    if repr(value) != text:
        raise ValueError("a float whose JSON is not its repr")
    return value


_DECODE_VALUE = msgspec.json.Decoder(float_hook=_check_float).decode


def canonical_value(tok: bytes) -> bool:
    """Whether the JSON value `tok` (valid JSON with canonical strings) is exactly what Python's json (compact,
    ensure_ascii=False) writes for the value it holds: msgspec writes back the same bytes (no whitespace, no
    repeated key, integers as their digits) and every float reads back as its own text (msgspec and Python
    write some floats differently: those are refused)."""
    try:
        return _ENCODE(_DECODE_VALUE(tok)) == tok
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError, UnicodeEncodeError):
        return False


class _NotRaw(Exception):
    """The entry cannot be proved byte-identical here: the caller renders it."""


# Every token below comes from a line `canonical_span` accepted: a string token is spliced as it is.


def _str(raw: _R) -> bytes | None:
    """The JSON a `_put(..., str)` keeps: the field's token when it is a string, None when it is absent or of
    another type."""
    if len(raw):
        tok = bytes(raw)
        if tok[0] == _QUOTE:
            return tok
    return None


#: A body string token (a block's text) longer than this is given as its `Raw` view of the line, not copied:
#: a caller that keeps it keeps a view of the file's bytes (48 bytes and the line's view), not another copy.
VIEW_BYTES = 512


def _body(raw: _R) -> bytes | _R | None:
    """A block's text: the field's token when it is a string (a long one as its view), else None."""
    n = len(raw)
    if not n:
        return None
    if n > VIEW_BYTES:
        with memoryview(raw) as view:
            first = view[0]
        return raw if first == _QUOTE else None
    tok = bytes(raw)
    return tok if tok[0] == _QUOTE else None


def _int(raw: _R) -> bytes | None:
    """The JSON a `_put(..., int)` keeps (not a bool, not a float such as 5.0): its digits, when short."""
    if not len(raw):
        return None
    tok = bytes(raw)
    c = tok[0]
    if not (48 <= c <= 57 or c == 45):  # a digit or "-": a number
        return None
    if _INT.fullmatch(tok) is not None:
        return tok
    if b"." in tok or b"e" in tok or b"E" in tok:
        return None  # a float
    raise _NotRaw  # a long integer or -0: rendered


def _bool(raw: _R) -> bytes | None:
    if len(raw):
        tok = bytes(raw)
        if tok == _TRUE or tok == _FALSE:
            return tok
    return None


def _id_of(raw: _R) -> str | None:
    """The string a field holds, decoded (an id, read to make its safe id), None when it is not a string."""
    if len(raw):
        tok = bytes(raw)
        if tok[0] == _QUOTE:
            value: str = _DECODE_STR(tok)
            return value
    return None


_DECODE_STR = msgspec.json.Decoder(str).decode


def _nsid(raw: _R) -> bytes | None:
    s = _id_of(raw)
    return None if s is None else _ENCODE(NATIVE_PREFIX + safe_id(s))


Pairs = tuple[tuple[str, "bytes | _R"], ...]

_TEXT = b'"text"'
_THINKING = b'"thinking"'
_TOOLCALL = b'"toolCall"'
_IMAGE = b'"image"'
_K_TEXT = ("kind", _TEXT)
_K_THINKING = ("kind", _THINKING)
_K_TOOLCALL = ("kind", _TOOLCALL)
_K_IMAGE = ("kind", _IMAGE)
_K_COMMAND = ("kind", b'"command"')
_K_UNSUPPORTED = ("kind", b'"unsupported"')
_REDACTED: Pairs = (("kind", b'"unavailable"'), ("reason", b'"redacted"'), ("text", _EMPTY))
_NO_TYPE: Pairs = (_K_UNSUPPORTED, ("type", b'"<no type>"'))
_BAD_TEXT: Pairs = (_K_UNSUPPORTED, ("type", _TEXT))
_BAD_THINKING: Pairs = (_K_UNSUPPORTED, ("type", _THINKING))
_NULL_ARGUMENTS = ("arguments", _NULL)


def _redacted(raw: _R) -> bool:
    """`_block`'s test: `redacted` is not None, not False and != 0."""
    if not len(raw):
        return False
    tok = bytes(raw)
    if tok == _NULL or tok == _FALSE:
        return False
    c = tok[0]
    if 48 <= c <= 57 or c == 45:  # a number: redacted unless it equals 0
        number: int | float = msgspec.json.decode(tok)
        return number != 0
    return True  # true, a string, an array or an object


def _block(b: _Block) -> Pairs:
    """`_render._block` on raw fields."""
    if not len(b.type):
        return _NO_TYPE
    btype = bytes(b.type)
    if btype == _TEXT:
        text = _body(b.text)
        return _BAD_TEXT if text is None else (_K_TEXT, ("text", text))
    if btype == _THINKING:
        if len(b.redacted) and _redacted(b.redacted):
            return _REDACTED
        text = _body(b.thinking)
        return _BAD_THINKING if text is None else (_K_THINKING, ("text", text))
    if btype == _TOOLCALL:
        s = _id_of(b.id)
        name = _str(b.name)
        if len(b.arguments):
            arguments = bytes(b.arguments)
            if not canonical_value(arguments):
                raise _NotRaw  # whitespace, a repeated key, a float msgspec writes otherwise: rendered
            args = ("arguments", arguments)
        else:
            args = _NULL_ARGUMENTS
        return (_K_TOOLCALL, ("id", _NULL if s is None else _ENCODE(safe_id(s))),
                ("name", _NULL if name is None else name), args)
    if btype == _IMAGE:
        mime = _str(b.mimeType)
        return (_K_IMAGE, ("mimeType", _NULL if mime is None else mime))
    if btype[0] != _QUOTE:
        return _NO_TYPE
    if b"\\" in btype:
        raise _NotRaw  # an escaped spelling may name a known type: rendered
    if len(btype) - 2 > TYPE_NAME_MAX:  # may be longer than TYPE_NAME_MAX characters: cut as _block cuts it
        btype = _ENCODE(_DECODE_STR(btype)[:TYPE_NAME_MAX])
    return (_K_UNSUPPORTED, ("type", btype))


def _content(content: Any) -> tuple[Pairs, ...]:
    """`_render.content_blocks` on a decoded list of blocks, or on a raw content (`_EntryRaw`)."""
    if content is None:
        return ()
    if type(content) is list:
        return tuple([_block(b) for b in content])
    if not len(content):
        return ()
    tok = bytes(content)
    if tok == _NULL:
        return ()
    if tok[0] == _QUOTE:
        return ((_K_TEXT, ("text", tok)),)  # (a string content: copied, as `tok` is already)
    raise _NotRaw  # a content of a wrong type: rendered (its unsupported block describes it)


_MESSAGE = b'"message"'
_CUSTOM_MESSAGE = b'"custom_message"'
_COMPACTION = b'"compaction"'
_BRANCH_SUMMARY = b'"branch_summary"'
_USER = b'"user"'
_ASSISTANT = b'"assistant"'
_TOOL_RESULT = b'"toolResult"'
_BASH = b'"bashExecution"'


def decode_long(view: memoryview) -> Any:
    """The line `view` read once into the raw fields `render_decoded` renders from, with its `id` and
    `parentId` raw too (the line index takes its head from them: `_lines._long_head`). Raises what msgspec
    raises; the raw fields hold the view (never release it under them)."""
    return _DECODE_LONG(view)


def render_decoded(e: Any, buf: bytes, a: int, b: int, raw_id: str, line: int) -> ItemJson | None:
    """`render_json(buf, a, b, raw_id, line)` from the line's fields as `decode_long` read them (the same
    rules on the same bytes; the line is not read again)."""
    if not canonical_span(buf, a, b):
        return None
    return _rendered(e, raw_id, line)


def render_json(buf: bytes, a: int, b: int, raw_id: str, line: int) -> ItemJson | None:
    """The JSON pieces of the item that the entry line `buf[a:b]` renders as (`render_entry(value, raw_id,
    line)`), or None when this path does not prove them byte-identical (module doc: the caller renders)."""
    if not canonical_span(buf, a, b):
        return None
    try:
        # No `with`: the Raw fields hold the view (released with them, by reference counting).
        view = memoryview(buf)[a:b]
        try:
            e: Any = _DECODE(view)
        except msgspec.ValidationError:
            e = _DECODE_RAW(view)  # a content that is a string (or of a wrong type)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return _rendered(e, raw_id, line)


def _rendered(e: Any, raw_id: str, line: int) -> ItemJson | None:
    """`_entry`, with None where it finds a field it does not prove (the caller renders)."""
    try:
        return _entry(e, raw_id, line)
    except (_NotRaw, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def _entry(e: Any, raw_id: str, line: int) -> ItemJson | None:
    """`render_entry` on raw fields (None where it makes a notice or nothing: rendered)."""
    tok: bytes | None
    text: bytes | _R | None
    etype = bytes(e.type)
    nsid = NATIVE_PREFIX + safe_id(raw_id)
    raw = e.timestamp
    timestamp = _NULL
    if len(raw):
        tok = bytes(raw)
        if tok[0] == _QUOTE:
            timestamp = tok
    attrs: list[tuple[str, bytes]] = []
    if etype == _MESSAGE:
        msg = e.message
        if msg is None:
            return None  # no message object: a notice
        role = bytes(msg.role)
        if role == _ASSISTANT:
            for key in ASSISTANT_STR_ATTRS:  # _str, inline (the commonest entry's five attributes)
                raw = getattr(msg, key)
                if len(raw):
                    tok = bytes(raw)
                    if tok[0] == _QUOTE:
                        attrs.append((key, tok))
            return ItemJson(nsid, "assistant", line, timestamp, tuple(attrs), _content(msg.content))
        if role == _TOOL_RESULT:
            call = _id_of(msg.toolCallId)
            if call is not None:
                attrs.append(("toolCallId", _ENCODE(safe_id(call))))
            tok = _str(msg.toolName)
            if tok is not None:
                attrs.append(("toolName", tok))
            tok = _bool(msg.isError)
            if tok is not None:
                attrs.append(("isError", tok))
            return ItemJson(nsid, "toolResult", line, timestamp, tuple(attrs), _content(msg.content))
        if role == _USER:
            return ItemJson(nsid, "user", line, timestamp, (), _content(msg.content))
        if role == _BASH:
            blocks: list[Pairs] = []
            text = _body(msg.command)
            if text is not None:
                blocks.append((_K_COMMAND, ("text", text)))
            text = _body(msg.output)
            if text is not None:
                blocks.append((_K_TEXT, ("text", text)))
            tok = _int(msg.exitCode)
            if tok is not None:
                attrs.append(("exitCode", tok))
            for key in BASH_BOOL_ATTRS:
                tok = _bool(getattr(msg, key))
                if tok is not None:
                    attrs.append((key, tok))
            return ItemJson(nsid, "bashExecution", line, timestamp, tuple(attrs), tuple(blocks))
        return None  # an unknown role, or an escaped spelling of a known one: rendered
    if etype == _CUSTOM_MESSAGE:
        if bytes(e.display) != _TRUE:
            return None  # hidden
        tok = _str(e.customType)
        if tok is not None:
            attrs.append(("customType", tok))
        return ItemJson(nsid, "custom_message", line, timestamp, tuple(attrs), _content(e.content))
    if etype == _COMPACTION or etype == _BRANCH_SUMMARY:
        summary = _body(e.summary)
        texts: tuple[Pairs, ...] = () if summary is None else ((_K_TEXT, ("text", summary)),)
        if etype == _COMPACTION:
            tok = _int(e.tokensBefore)
            if tok is not None:
                attrs.append(("tokensBefore", tok))
            tok = _nsid(e.firstKeptEntryId)
            if tok is not None:
                attrs.append(("firstKeptEntryId", tok))
            return ItemJson(nsid, "compaction", line, timestamp, tuple(attrs), texts)
        tok = _nsid(e.fromId)
        if tok is not None:
            attrs.append(("fromId", tok))
        return ItemJson(nsid, "branch_summary", line, timestamp, tuple(attrs), texts)
    return None  # hidden, unknown (a notice), or an escaped spelling of a known type: rendered
