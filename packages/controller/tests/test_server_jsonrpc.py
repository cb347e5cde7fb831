"""The wire format (`_jsonrpc`): every malformed kind gets its stable code, the id is echoed only when
usable, JSON is strict, and the encoders write exactly one LF-terminated line. Pure: no sockets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.controller.core import Call
from mosaic.controller.protocol import (
    ENUMS,
    ERROR_CODES,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARAMS,
    PARSE_ERROR,
    ParsedRequest,
    RequestError,
    encode_error,
    encode_notification,
    encode_result,
    parse_line,
)

PROMPT = {"incarnation": "inc", "generation": 3, "clientRequestId": "r1", "text": "hello"}


def line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def req(method: str, params: Any = None, rpc_id: Any = 1, **extra: Any) -> bytes:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
    if params is not None:
        obj["params"] = params
    obj.update(extra)
    return line(obj)


def error(raw: bytes) -> RequestError:
    result = parse_line(raw)
    assert isinstance(result, RequestError), result
    assert result.code in ERROR_CODES
    return result


def valid_params(method: str) -> dict[str, Any]:
    """Every param of `method`, required or not, with a value of the right type (enums: a member)."""
    out: dict[str, Any] = {}
    for name, (kind, _required) in PARAMS[method].items():
        allowed = ENUMS.get((method, name))
        out[name] = sorted(allowed)[0] if allowed else ("v" if kind is str else 7)
    return out


# ------------------------------------------------------------------------------------------- well formed


@pytest.mark.parametrize("method", sorted(PARAMS))
def test_every_method_with_all_its_params_is_a_request(method: str) -> None:
    params = valid_params(method)
    result = parse_line(req(method, params, rpc_id="a-1"))
    assert result == ParsedRequest("a-1", method, params)
    assert isinstance(result, ParsedRequest)
    assert result.to_call("c9") == Call("c9", "a-1", method, params)


@pytest.mark.parametrize("method", sorted(PARAMS))
def test_every_method_with_only_its_required_params_is_a_request(method: str) -> None:
    params = {k: v for k, v in valid_params(method).items() if PARAMS[method][k][1]}
    result = parse_line(req(method, params))
    assert isinstance(result, ParsedRequest) and dict(result.params) == params


def test_params_may_be_left_out_when_none_is_required() -> None:
    assert parse_line(req("ping")) == ParsedRequest(1, "ping", {})
    assert parse_line(req("observe")) == ParsedRequest(1, "observe", {})


def test_one_trailing_cr_is_stripped_and_utf8_text_kept() -> None:
    params = dict(PROMPT, text="h\u00e9llo \u2028 \U0001f600")
    result = parse_line(req("prompt", params) + b"\r")
    assert isinstance(result, ParsedRequest) and result.params["text"] == params["text"]


def test_params_are_read_only() -> None:
    result = parse_line(req("prompt", PROMPT))
    assert isinstance(result, ParsedRequest)
    with pytest.raises(TypeError):
        result.params["text"] = "changed"  # type: ignore[index]


def test_an_escaped_surrogate_pair_is_one_character_not_a_lone_surrogate() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"method":"prompt","params":{"incarnation":"i","generation":1,' \
          b'"clientRequestId":"r","text":"\\ud83d\\ude00"}}'
    result = parse_line(raw)
    assert isinstance(result, ParsedRequest) and result.params["text"] == "\U0001f600"


# --------------------------------------------------------------------------------------------- malformed

MALFORMED: list[tuple[str, bytes, int, Any]] = [
    # (name, line, code, id echoed)
    ("not-json", b"hello", PARSE_ERROR, None),
    ("empty-line", b"", PARSE_ERROR, None),
    ("truncated-json", b'{"jsonrpc":"2.0","id":1,"method":"ping"', PARSE_ERROR, None),
    ("invalid-utf8", b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', PARSE_ERROR, None),
    ("utf8-encoded-surrogate", b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}', PARSE_ERROR, None),
    ("duplicate-keys", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', PARSE_ERROR, None),
    ("duplicate-param", b'{"jsonrpc":"2.0","id":1,"method":"observe","params":{"cursor":"a","cursor":"b"}}',
     PARSE_ERROR, None),
    ("nan", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', PARSE_ERROR, None),
    ("infinity", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}', PARSE_ERROR, None),
    ("overflowing-float", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1e400}}', PARSE_ERROR, None),
    ("lone-surrogate", b'{"jsonrpc":"2.0","id":1,"method":"prompt","params":{"text":"\\ud800"}}',
     PARSE_ERROR, None),
    ("lone-surrogate-key", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\\udc00":1}}', PARSE_ERROR, None),
    ("too-deep", b"[" * 100_000 + b"]" * 100_000, PARSE_ERROR, None),
    ("huge-int", b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', PARSE_ERROR, None),
    ("bom", b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}', PARSE_ERROR, None),
    ("batch", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', INVALID_REQUEST, None),
    ("empty-batch", b"[]", INVALID_REQUEST, None),
    ("scalar", b"42", INVALID_REQUEST, None),
    ("string", b'"ping"', INVALID_REQUEST, None),
    ("no-jsonrpc", line({"id": 5, "method": "ping"}), INVALID_REQUEST, 5),
    ("jsonrpc-1", line({"jsonrpc": "1.0", "id": 5, "method": "ping"}), INVALID_REQUEST, 5),
    ("jsonrpc-number", line({"jsonrpc": 2.0, "id": "x", "method": "ping"}), INVALID_REQUEST, "x"),
    ("no-id", line({"jsonrpc": "2.0", "method": "ping"}), INVALID_REQUEST, None),
    ("null-id", line({"jsonrpc": "2.0", "id": None, "method": "ping"}), INVALID_REQUEST, None),
    ("bool-id", line({"jsonrpc": "2.0", "id": True, "method": "ping"}), INVALID_REQUEST, None),
    ("float-id", line({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}), INVALID_REQUEST, None),
    ("integral-float-id", b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}', INVALID_REQUEST, None),
    ("object-id", line({"jsonrpc": "2.0", "id": {}, "method": "ping"}), INVALID_REQUEST, None),
    ("no-method", line({"jsonrpc": "2.0", "id": 5}), INVALID_REQUEST, 5),
    ("number-method", line({"jsonrpc": "2.0", "id": 5, "method": 3}), INVALID_REQUEST, 5),
    ("array-params", req("ping", [], rpc_id=5), INVALID_REQUEST, 5),
    ("string-params", req("ping", "x", rpc_id=5), INVALID_REQUEST, 5),
    ("null-params", b'{"jsonrpc":"2.0","id":5,"method":"ping","params":null}', INVALID_REQUEST, 5),
    ("unknown-member", req("ping", rpc_id=5, extra=1), INVALID_REQUEST, 5),
    ("unknown-method", req("shutdown", {}, rpc_id=5), METHOD_NOT_FOUND, 5),
    ("method-case", req("PING", rpc_id="p"), METHOD_NOT_FOUND, "p"),
    ("unknown-param", req("ping", {"x": 1}, rpc_id=5), INVALID_PARAMS, 5),
    ("missing-required", req("prompt", {k: v for k, v in PROMPT.items() if k != "text"}, rpc_id=5),
     INVALID_PARAMS, 5),
    ("bool-for-int", req("prompt", dict(PROMPT, generation=True), rpc_id=5), INVALID_PARAMS, 5),
    ("float-for-int", req("prompt", dict(PROMPT, generation=3.0), rpc_id=5), INVALID_PARAMS, 5),
    ("string-for-int", req("prompt", dict(PROMPT, generation="3"), rpc_id=5), INVALID_PARAMS, 5),
    ("int-for-string", req("prompt", dict(PROMPT, text=3), rpc_id=5), INVALID_PARAMS, 5),
    ("null-for-string", req("observe", {"cursor": None}, rpc_id=5), INVALID_PARAMS, 5),
    ("enum-outside", req("issue-confirmation", {"incarnation": "i", "operation": "delete"}, rpc_id=5),
     INVALID_PARAMS, 5),
]


@pytest.mark.parametrize(("raw", "code", "rpc_id"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_each_malformed_kind_gets_its_code_and_the_id_only_when_usable(raw: bytes, code: int, rpc_id: Any) -> None:
    result = error(raw)
    assert result.code == code
    assert result.rpc_id == rpc_id
    assert type(result.rpc_id) is type(rpc_id)


@pytest.mark.parametrize(("params", "name"), [
    ({k: v for k, v in PROMPT.items() if k != "clientRequestId"}, "clientRequestId"),
    (dict(PROMPT, generation=False), "generation"),
    (dict(PROMPT, colour="red"), "colour"),
])
def test_an_invalid_params_error_names_the_param(params: dict[str, Any], name: str) -> None:
    result = error(req("prompt", params))
    assert result.code == INVALID_PARAMS
    assert name in result.message
    assert result.data == {"param": name}


def test_a_long_method_name_is_shortened_in_the_message() -> None:
    result = error(req("x" * 100_000))
    assert result.code == METHOD_NOT_FOUND and len(result.message) < 200


# -------------------------------------------------------------------------------------------- encoders


def test_encoders_write_one_compact_line() -> None:
    assert encode_result(7, {"a": [1, 2]}) == b'{"jsonrpc":"2.0","id":7,"result":{"a":[1,2]}}\n'
    assert encode_error(None, -32700, "parse error") == \
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}\n'
    assert encode_error("x", -32001, "no", {"refusal": {"code": "busy"}}) == \
        b'{"jsonrpc":"2.0","id":"x","error":{"code":-32001,"message":"no","data":{"refusal":{"code":"busy"}}}}\n'
    assert encode_notification("closing", {"reason": "idle"}) == \
        b'{"jsonrpc":"2.0","method":"closing","params":{"reason":"idle"}}\n'


def test_u2028_and_u2029_stay_raw_and_do_not_end_the_line() -> None:
    out = encode_notification("event", {"text": "a\u2028b\u2029c\nd"})
    assert "\u2028".encode() in out and "\u2029".encode() in out
    assert out.count(b"\n") == 1 and out.endswith(b"\n")
    assert json.loads(out)["params"]["text"] == "a\u2028b\u2029c\nd"


def test_a_lone_surrogate_is_escaped_so_the_line_is_utf8() -> None:
    out = encode_result(1, {"text": "a\ud800b"})
    assert b"\\ud800" in out
    out.decode("utf-8")


def test_mappings_that_are_not_dicts_are_written_as_objects() -> None:
    from types import MappingProxyType

    out = encode_result(1, MappingProxyType({"p": MappingProxyType({"q": 1})}))
    assert json.loads(out)["result"] == {"p": {"q": 1}}


@pytest.mark.parametrize("bad", [float("nan"), {1, 2}, b"bytes"])
def test_a_value_json_cannot_carry_raises(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        encode_result(1, {"x": bad})


# ------------------------------------------------------------------------------------------- properties

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=512))
def test_no_bytes_make_the_parser_raise(raw: bytes) -> None:
    result = parse_line(raw)
    assert isinstance(result, (ParsedRequest, RequestError))
    if isinstance(result, RequestError):
        assert result.code in ERROR_CODES


@settings(max_examples=1000, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "x"]),
        JSON | st.sampled_from(["2.0", *sorted(PARAMS)]) | st.just(PROMPT),
        max_size=5,
    ),
    st.sampled_from([b"", b"\r", b" "]),
)
def test_no_request_shaped_json_makes_the_parser_raise(obj: dict[str, Any], tail: bytes) -> None:
    raw = json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass") + tail
    result = parse_line(raw)
    if isinstance(result, RequestError):
        assert result.code in ERROR_CODES
        if result.rpc_id is not None:
            assert result.rpc_id == obj.get("id")
    else:
        assert isinstance(result, ParsedRequest)
        assert result.method in PARAMS and result.rpc_id == obj["id"]


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.integers(), st.text()), JSON)
def test_encoded_results_are_one_line_that_reads_back(rpc_id: int | str, value: Any) -> None:
    out = encode_result(rpc_id, value)
    assert out.endswith(b"\n") and out.count(b"\n") == 1
    assert json.loads(out) == {"jsonrpc": "2.0", "id": rpc_id, "result": value}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(PARAMS)), st.one_of(st.integers(), st.text(max_size=20)))
def test_a_request_a_client_encodes_parses_back(method: str, rpc_id: int | str) -> None:
    params = valid_params(method)
    raw = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params},
                     ensure_ascii=False).encode("utf-8", "surrogatepass")
    result = parse_line(raw)
    if any("\ud800" <= ch <= "\udfff" for ch in str(rpc_id)):
        assert isinstance(result, RequestError) and result.code == PARSE_ERROR
    else:
        assert result == ParsedRequest(rpc_id, method, params)
