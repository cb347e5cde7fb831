"""The socket protocol's wire format, sans-io: one request line in, a `ParsedRequest` or a `RequestError` out;
results, errors and notifications out as one line each.

The rules this file keeps (brief §1 "Controller and transport"; JSON-RPC 2.0; the table is
mosaic-controller-client's `_protocol.py`):

1. A message is one line ending in LF (the caller splits on LF only and hands over the line without it).
   One trailing CR is stripped, so a CRLF client is read correctly (the same rule as pi-rpc's framing).
2. Parsing never raises. Every failure is a `RequestError` with a code from `ERROR_CODES`:

   ============================================================  =======  ===============
   what                                                           code     ``id`` echoed
   ============================================================  =======  ===============
   not UTF-8, not JSON, or not *strict* JSON (rule 3)             -32700   never (null)
   JSON but not a request object: a batch array, a scalar,        -32600   when usable
   ``jsonrpc`` not "2.0", no ``id`` / an id that is not a
   string or integer (bool, float, null), no string ``method``,
   ``params`` present but not an object, an unknown member
   a method not in ``PARAMS`` (nor ``UNVERIFIED_METHODS``, whose  -32601   yes
   params go unchecked to the core, which refuses them; approval's
   are checked against its ``PARAMS`` row)
   params that break ``PARAMS`` / ``ENUMS`` / ``RANGES``: a       -32602   yes
   missing required param, an unknown param, a wrong type (a bool
   is not an int, a float is not an int), a value outside its
   enumeration or its range
   ============================================================  =======  ===============

   "Usable" means the top level is an object whose ``id`` is a string or an integer (not a bool): the error
   then carries that id, so the client can match it; every other error carries ``id: null``.
3. JSON is strict (I-JSON, RFC 7493): a duplicate member name, ``NaN``/``Infinity``/``-Infinity``, a
   number that overflows to an infinite float (``1e400``), an integer past Python's digit limit and a
   lone surrogate escape (``"\\ud800"``) are all -32700: the text is not one unambiguous JSON value, so
   nothing in it (not even the id) is trusted. Nesting deeper than the interpreter's recursion limit is
   -32700 too.
4. Encoders write compact JSON (no spaces) with ``ensure_ascii=False``: non-ASCII text goes out raw as UTF-8.
   JSON escapes every control character inside strings, so the LF that ends the line is the only LF in it.
   U+2028 and U+2029 stay raw: they are not LF, and every reader of this protocol splits on LF only (the
   brief's rule for Pi's stream, mutant 11, holds here too). A lone surrogate in an outgoing string is
   written as a ``\\udXXX`` escape (what ``JSON.stringify`` does), so the bytes are always valid UTF-8.
   Any `Mapping` is written as an object (the core hands out read-only mappings); a value JSON cannot
   carry (NaN, a set, bytes) raises ``ValueError``/``TypeError``: that is a bug in the
   caller, and the server turns it into -32603 for the request (see `_socket_server`).
5. The server's fan-out of the core's notifications encodes with msgspec (`notification_line`, issue 34:
   about 8x faster than json's encoder on the core's records): the same bytes as `encode_notification` for
   every JSON value but a float json writes with an exponent (``1e+16``, ``2.5e-05``: msgspec writes
   ``1e16``, ``0.000025``, the same number); a lone surrogate or a value msgspec cannot encode goes to
   `encode_notification` (and raises as it does). It does not refuse what is JSON to msgspec and not to
   json (a float NaN or infinity is written ``null``, bytes as base64, a set as an array): the core's
   notifications hold none (its floats are clock readings; engine records are decoded strictly, NaN and
   Infinity refused by pi-rpc; client values are refused at parse, rule 3).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import msgspec

from mosaic.controller_client import (
    ENUMS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARAMS,
    PARSE_ERROR,
    RANGES,
    UNVERIFIED_METHODS,
)

from ..core._io import Call, ConnId, RpcId

__all__ = [
    "RequestError",
    "ParsedRequest",
    "encode_error",
    "encode_notification",
    "encode_result",
    "notification_line",
    "parse_line",
]

_MEMBERS = frozenset({"jsonrpc", "id", "method", "params"})
_TYPE_NAMES: Mapping[type, str] = MappingProxyType({str: "a string", int: "an integer"})

# A quick pre-check: a lone surrogate can only enter through a \uD800-\uDFFF escape (raw surrogate bytes are
# not UTF-8 and fail the decode). Texts without one skip the walk over the parsed value.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class ParsedRequest:
    """A well-formed request: a known method, validated params (read-only), the client's id."""

    rpc_id: RpcId
    method: str
    params: Mapping[str, Any]

    def to_call(self, conn: ConnId) -> Call:
        """The core's input for this request on connection `conn`."""
        return Call(conn, self.rpc_id, self.method, self.params)


@dataclass(frozen=True)
class RequestError:
    """A request the protocol layer refuses: answer it with `encode_error(rpc_id, code, message, data)`.

    `rpc_id` is the request's id when it was usable (see the module docstring), otherwise None."""

    code: int
    message: str
    rpc_id: RpcId | None = None
    data: Mapping[str, Any] | None = None


class _NotStrict(ValueError):
    """Raised inside json.loads by the strict hooks; caught by parse_line."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _NotStrict(f"duplicate member name {_short(key)}")
            seen.add(key)
    return obj


def _constant(name: str) -> Any:
    raise _NotStrict(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotStrict(f"number {_short(text)} is out of range")
    return value


# Built once: json.loads with hooks would build a decoder per call. The C scanner keeps no state between
# calls, so one decoder serves every caller.
_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float)


def _has_lone_surrogate(value: Any) -> bool:
    # Iterative: the value may be nested up to the recursion limit json.loads allowed.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            for key, val in item.items():
                if _LONE_SURROGATE.search(key):
                    return True
                stack.append(val)
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _usable_id(value: object) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction or exponent"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def parse_line(line: bytes) -> ParsedRequest | RequestError:
    """Parse one request line (without its LF; one trailing CR is stripped).

    Returns a `ParsedRequest` whose params passed `PARAMS`/`ENUMS`, or a `RequestError` whose code is one of
    `ERROR_CODES` (the table in the module docstring). Never raises, whatever the bytes.
    """
    if line.endswith(b"\r"):
        line = line[:-1]
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RequestError(PARSE_ERROR, f"parse error: not UTF-8 at byte {exc.start}")
    try:
        value = _DECODER.decode(text)
    except _NotStrict as exc:
        return RequestError(PARSE_ERROR, f"parse error: not strict JSON: {exc}")
    except RecursionError:
        return RequestError(PARSE_ERROR, "parse error: nested too deeply")
    except ValueError as exc:  # JSONDecodeError, and int() past the digit limit
        return RequestError(PARSE_ERROR, f"parse error: {_short(str(exc), 120)}")
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        return RequestError(PARSE_ERROR, "parse error: not strict JSON: a lone surrogate in a string")
    return _request(value)


def _request(value: Any) -> ParsedRequest | RequestError:
    if isinstance(value, list):
        return RequestError(INVALID_REQUEST, "invalid request: batches are not supported")
    if not isinstance(value, dict):
        return RequestError(INVALID_REQUEST, f"invalid request: {_kind(value)} is not a request object")
    raw_id = value.get("id")
    rpc_id: RpcId | None = raw_id if _usable_id(raw_id) else None
    if value.get("jsonrpc") != "2.0":
        return RequestError(INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"', rpc_id)
    if "id" not in value:
        # A JSON-RPC notification: this protocol answers every request, so a client must give an id.
        return RequestError(INVALID_REQUEST, 'invalid request: no "id" (notifications are not accepted)')
    if rpc_id is None:
        return RequestError(
            INVALID_REQUEST, f'invalid request: "id" must be a string or an integer, not {_kind(raw_id)}')
    extra = sorted(set(value) - _MEMBERS)
    if extra:
        return RequestError(INVALID_REQUEST, f"invalid request: unknown member {_short(extra[0])}", rpc_id)
    method = value.get("method")
    if not isinstance(method, str):
        return RequestError(INVALID_REQUEST, 'invalid request: "method" must be a string', rpc_id)
    params = value.get("params", {})
    if not isinstance(params, dict):
        return RequestError(
            INVALID_REQUEST, f'invalid request: "params" must be an object, not {_kind(params)}', rpc_id)
    if method in UNVERIFIED_METHODS and method not in PARAMS:  # the core refuses it: its params are not checked
        return ParsedRequest(rpc_id, method, MappingProxyType(params))
    spec = PARAMS.get(method)
    if spec is None:
        return RequestError(METHOD_NOT_FOUND, f"method not found: {_short(method)}", rpc_id)
    for name in params:
        if name not in spec:
            return _bad_param(rpc_id, method, name, "is not a parameter of this method")
    for name, (kind, required) in spec.items():
        if name not in params:
            if required:
                return _bad_param(rpc_id, method, name, "is required")
            continue
        got = params[name]
        if not isinstance(got, kind) or (kind is int and isinstance(got, bool)):
            return _bad_param(rpc_id, method, name,
                              f"must be {_TYPE_NAMES.get(kind, kind.__name__)}, not {_kind(got)}")
        allowed = ENUMS.get((method, name))
        if allowed is not None and got not in allowed:
            return _bad_param(rpc_id, method, name, f"must be one of {sorted(allowed)}")
        bounds = RANGES.get((method, name))
        if bounds is not None and isinstance(got, int) and not bounds[0] <= got <= bounds[1]:
            return _bad_param(rpc_id, method, name, f"must be from {bounds[0]} to {bounds[1]}")
    return ParsedRequest(rpc_id, method, MappingProxyType(params))


def _bad_param(rpc_id: RpcId, method: str, name: str, why: str) -> RequestError:
    return RequestError(INVALID_PARAMS, f"invalid params for {method}: {_short(name)} {why}", rpc_id,
                         {"param": name})


# ---------------------------------------------------------------------------------------------- encoding


def _default(value: object) -> Any:
    # The core's values may be read-only mappings (MappingProxyType) or tuples; json knows only dict.
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default)


def _dumps(obj: Mapping[str, Any]) -> bytes:
    text = _ENCODER.encode(obj)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # only a lone surrogate fails; searching every text for one costs more
        data = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")
    return data + b"\n"


def encode_result(rpc_id: RpcId, result: Any) -> bytes:
    """The response line ``{"jsonrpc":"2.0","id":rpc_id,"result":result}`` + LF.

    Raises `TypeError`/`ValueError` when `result` is not JSON (a caller's bug)."""
    return _dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result})


def encode_error(rpc_id: RpcId | None, code: int, message: str, data: Any = None) -> bytes:
    """The error line ``{"jsonrpc":"2.0","id":rpc_id,"error":{"code","message"[,"data"]}}`` + LF; `data`
    is left out when None, `rpc_id` None is written as null. Raises like `encode_result`."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _dumps({"jsonrpc": "2.0", "id": rpc_id, "error": error})


def encode_notification(method: str, params: Any) -> bytes:
    """The notification line ``{"jsonrpc":"2.0","method":method,"params":params}`` + LF (no id).
    Raises like `encode_result`."""
    return _dumps({"jsonrpc": "2.0", "method": method, "params": params})


_FAST = msgspec.json.Encoder(enc_hook=_default)


def notification_line(method: str, params: Any) -> bytes:
    """`encode_notification`'s line, encoded by msgspec (rule 5): what the server writes for the core's
    notifications. Falls back to `encode_notification` for what msgspec refuses (and raises as it does)."""
    try:
        return _FAST.encode({"jsonrpc": "2.0", "method": method, "params": params}) + b"\n"
    except (TypeError, ValueError):  # a lone surrogate (UnicodeEncodeError), a value that is not JSON
        return encode_notification(method, params)
