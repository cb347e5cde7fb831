"""``JSON.parse`` as Node 22 (V8 12) does it: the value, or the exact error message V8 throws.

The fake engine answers a line it cannot parse with ``Failed to parse command: <V8 message>``
(rpc-mode.js 604-613), so the message text is part of the wire protocol the fake must reproduce
(FACTS.md "What a Python fake engine must mimic" 1). The messages below were read off the pinned Node
22.23.5 (``node -e 'JSON.parse(...)'``); positions count UTF-16 code units, as JavaScript strings do.

Rules (V8 src/json/json-parser.cc, observed):

* end of input where a value is expected: ``Unexpected end of JSON input``;
* a character that cannot start or continue a token: ``Unexpected token 'c', "<src>" is not valid JSON``
  when the source has at most 20 code units, else with context: up to 10 units either side of the
  position, ``...`` marking a cut on either side: ``Unexpected token 'c', ..."<ctx>"... is not valid JSON``;
* structural expectations name what was expected, with ``in JSON at position P (line L column C)``;
* a number with a leading zero followed by a digit: ``Unexpected number in JSON at position P ...``;
* JSON whitespace is only space, tab, LF, CR; U+2028 is an unexpected token.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["JsonParseError", "js_json_parse"]


class JsonParseError(ValueError):
    """``message`` is V8's ``SyntaxError`` message for the input."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Fail(Exception):
    pass


def _units(text: str) -> list[str]:
    """The string as UTF-16 code units (an astral character becomes its two surrogates)."""
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(chr(0xD800 + (cp >> 10)))
            out.append(chr(0xDC00 + (cp & 0x3FF)))
        else:
            out.append(ch)
    return out


def _join(units: list[str]) -> str:
    # Re-pair surrogates so that a context cut between them keeps a lone surrogate, as JS would.
    return "".join(units).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


class _Parser:
    def __init__(self, text: str) -> None:
        self.u = _units(text)
        self.n = len(self.u)
        self.i = 0

    # -- errors -------------------------------------------------------------------------------------

    def _where(self, pos: int) -> str:
        line, col = 1, 1
        k = 0
        while k < pos:
            c = self.u[k]
            if c == "\n":
                line, col = line + 1, 1
            elif c == "\r":
                if k + 1 < self.n and self.u[k + 1] == "\n":
                    k += 1
                line, col = line + 1, 1
            else:
                col += 1
            k += 1
        return f"in JSON at position {pos} (line {line} column {col})"

    def fail_at(self, what: str, pos: int) -> _Fail:
        where = self._where(pos)
        if what.endswith("after JSON"):
            where = where.removeprefix("in JSON ")
        return _Fail(f"{what} {where}")

    def unexpected(self, pos: int) -> _Fail:
        if pos >= self.n:
            return _Fail("Unexpected end of JSON input")
        tok = self.u[pos]
        if self.n <= 20:
            return _Fail(f"Unexpected token '{tok}', \"{_join(self.u)}\" is not valid JSON")
        start, end = max(0, pos - 10), min(self.n, pos + 10)
        pre = "..." if start > 0 else ""
        post = "..." if end < self.n else ""
        return _Fail(f"Unexpected token '{tok}', {pre}\"{_join(self.u[start:end])}\"{post} is not valid JSON")

    # -- scanning -----------------------------------------------------------------------------------

    def ws(self) -> None:
        while self.i < self.n and self.u[self.i] in " \t\n\r":
            self.i += 1

    def peek(self) -> str | None:
        return self.u[self.i] if self.i < self.n else None

    def value(self) -> None:
        self.ws()
        c = self.peek()
        if c is None:
            raise self.unexpected(self.i)
        if c == "{":
            self.obj()
        elif c == "[":
            self.arr()
        elif c == '"':
            self.string()
        elif c == "-" or "0" <= c <= "9":
            self.number()
        elif c in "tfn":
            self.literal({"t": "true", "f": "false", "n": "null"}[c])
        else:
            raise self.unexpected(self.i)

    def literal(self, word: str) -> None:
        for ch in word:
            if self.i >= self.n:
                raise self.unexpected(self.i)
            if self.u[self.i] != ch:
                raise self.unexpected(self.i)
            self.i += 1

    def number(self) -> None:
        if self.peek() == "-":
            self.i += 1
            c = self.peek()
            if c is None or not ("0" <= c <= "9"):
                raise self.fail_at("No number after minus sign", self.i)
        if self.peek() == "0":
            self.i += 1
            c = self.peek()
            if c is not None and "0" <= c <= "9":
                raise self.fail_at("Unexpected number", self.i)
        else:
            while (c := self.peek()) is not None and "0" <= c <= "9":
                self.i += 1
        if self.peek() == ".":
            self.i += 1
            c = self.peek()
            if c is None or not ("0" <= c <= "9"):
                raise self.fail_at("Unterminated fractional number", self.i)
            while (c := self.peek()) is not None and "0" <= c <= "9":
                self.i += 1
        if self.peek() in ("e", "E"):
            self.i += 1
            if self.peek() in ("+", "-"):
                self.i += 1
            c = self.peek()
            if c is None or not ("0" <= c <= "9"):
                raise self.fail_at("Exponent part is missing a number", self.i)
            while (c := self.peek()) is not None and "0" <= c <= "9":
                self.i += 1

    def string(self) -> None:
        self.i += 1  # opening quote
        while True:
            if self.i >= self.n:
                raise self.fail_at("Unterminated string", self.i)
            c = self.u[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\":
                self.i += 1
                if self.i >= self.n:
                    raise _Fail("Unexpected end of JSON input")
                e = self.u[self.i]
                if e == "u":
                    for k in range(1, 5):
                        if self.i + k >= self.n or self.u[self.i + k] not in "0123456789abcdefABCDEF":
                            raise self.fail_at("Bad Unicode escape", min(self.i + k, self.n))
                    self.i += 5
                    continue
                if e not in '"\\/bfnrt':
                    raise self.fail_at("Bad escaped character", self.i)
                self.i += 1
                continue
            if ord(c) < 0x20:
                raise self.fail_at("Bad control character in string literal", self.i)
            self.i += 1

    def obj(self) -> None:
        self.i += 1
        self.ws()
        if self.peek() == "}":
            self.i += 1
            return
        first = True
        while True:
            self.ws()
            if self.peek() != '"':
                what = "Expected property name or '}'" if first else "Expected double-quoted property name"
                raise self.fail_at(what, self.i)
            first = False
            self.string()
            self.ws()
            if self.peek() != ":":
                raise self.fail_at("Expected ':' after property name", self.i)
            self.i += 1
            self.value()
            self.ws()
            c = self.peek()
            if c == ",":
                self.i += 1
                continue
            if c == "}":
                self.i += 1
                return
            raise self.fail_at("Expected ',' or '}' after property value", self.i)

    def arr(self) -> None:
        self.i += 1
        self.ws()
        if self.peek() == "]":
            self.i += 1
            return
        while True:
            self.value()
            self.ws()
            c = self.peek()
            if c == ",":
                self.i += 1
                continue
            if c == "]":
                self.i += 1
                return
            raise self.fail_at("Expected ',' or ']' after array element", self.i)

    def document(self) -> None:
        self.value()
        self.ws()
        if self.i < self.n:
            raise self.fail_at("Unexpected non-whitespace character after JSON", self.i)


def js_json_parse(text: str) -> Any:
    """Parse ``text`` as ``JSON.parse`` would; raise :class:`JsonParseError` with V8's message."""
    try:
        _Parser(text).document()
    except _Fail as exc:
        raise JsonParseError(str(exc)) from None
    # The text is strict JSON now; Python's parser gives the same value (NaN/Infinity cannot occur).
    return json.loads(text)
