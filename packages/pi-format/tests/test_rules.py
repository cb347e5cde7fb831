"""One test per parser rule (seed README "Parser", corrected by FACTS.md (c)); each test is named by its rule."""

from __future__ import annotations

import json
import re

import pytest
from helpers import HEADER, PROJECT, check_invariants, entry, msg, ok, session, texts

from mosaic.pi_format import FormatRefusal, Parsed, parse, safe_id
from mosaic.pi_format.ids import is_chat01_id
from mosaic.pi_format.model import (
    CommandBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    UnavailableBlock,
    UnsupportedBlock,
)

HASHED = re.compile(r"h-[0-9a-f]{40}")


def refused(result: Parsed | FormatRefusal, code: str) -> FormatRefusal:
    assert isinstance(result, FormatRefusal), result
    assert result.code == code, result
    assert result.reconcile is FormatRefusal.CODES[code]
    return result


# --- line 1: the header ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first",
    [
        b"not json\n",
        b"\n",
        b"[1,2]\n",
        b'{"type":"message","id":"a"}\n',
        b'{"type":"session","version":3,"cwd":"/scratch/proj"}\n',  # no id
        b'{"type":"session","id":7,"version":3,"cwd":"/scratch/proj"}\n',
        b"\xff\xfe{}\n",
    ],
)
def test_line1_must_be_a_session_header_else_not_a_pi_session(first: bytes) -> None:
    refused(parse(first), "not-a-pi-session")
    refused(parse(first + b'{"type":"message","id":"a","parentId":null}\n'), "not-a-pi-session")


def test_line1_is_the_header_even_when_a_header_follows() -> None:
    # Pi scans for the first parsed value (FACTS loader quirk 2); the seed requires line 1.
    refused(parse(b"garbage\n" + session()), "not-a-pi-session")


@pytest.mark.parametrize("data", [b"", b'{"type":"sess', json.dumps(HEADER).encode(), b"  {"])
def test_header_without_newline_is_incomplete_header_with_reconcile(data: bytes) -> None:
    refused(parse(data), "incomplete-header")


def test_partial_first_line_that_cannot_be_a_header_is_not_a_pi_session() -> None:
    refused(parse(b"hello"), "not-a-pi-session")


@pytest.mark.parametrize("version", [None, 1, 4, "3", True])
def test_unsupported_session_version_is_not_a_pi_session(version: object) -> None:
    header = {**HEADER, "version": version}
    if version is None:
        del header["version"]
    refused(parse(session(header=header)), "not-a-pi-session")


def test_session_version_2_is_read() -> None:
    assert ok(parse(session(msg("a", None), header={**HEADER, "version": 2}))).header.version == 2


@pytest.mark.parametrize("cwd", ["relative/proj", "", "./x", None, 5])
def test_relative_or_missing_cwd_is_foreign_project(cwd: object) -> None:
    header = {**HEADER, "cwd": cwd}
    if cwd is None:
        del header["cwd"]
    refused(parse(session(header=header)), "foreign-project")
    refused(parse(session(header=header), project=PROJECT), "foreign-project")


@pytest.mark.parametrize(
    ("cwd", "inside"),
    [
        ("/scratch/proj", True),
        ("/scratch/proj/", True),
        ("/scratch/proj/sub/dir", True),
        ("/scratch/proj/./sub/../x", True),
        ("/scratch/proj2", False),
        ("/scratch", False),
        ("/scratch/proj/../other", False),
        ("/elsewhere", False),
    ],
)
def test_cwd_must_be_the_project_or_inside_it_lexically(cwd: str, inside: bool) -> None:
    result = parse(session(msg("a", None), header={**HEADER, "cwd": cwd}), project=PROJECT)
    if inside:
        assert ok(result).header.cwd == cwd
    else:
        refused(result, "foreign-project")


def test_cwd_is_compared_through_the_injected_realpath() -> None:
    # The project is reached through a symlink; the recorded cwd names the real directory.
    links = {"/link/proj": "/real/proj", "/real/proj/sub": "/real/proj/sub", "/real/other": "/real/other"}
    calls: list[str] = []

    def realpath(path: str) -> str:
        calls.append(path)
        return links.get(path, path)

    data = session(msg("a", None), header={**HEADER, "cwd": "/real/proj/sub"})
    assert isinstance(parse(data, project="/link/proj"), FormatRefusal)  # lexically outside
    ok(parse(data, project="/link/proj", realpath=realpath))
    assert sorted(calls) == ["/link/proj", "/real/proj/sub"]
    other = session(header={**HEADER, "cwd": "/real/other"})
    refused(parse(other, project="/link/proj", realpath=realpath), "foreign-project")


@pytest.mark.parametrize("error", [OSError(40, "loop"), ValueError("embedded null byte")])
def test_a_cwd_realpath_cannot_resolve_is_foreign_project(error: Exception) -> None:
    def realpath(path: str) -> str:
        raise error

    refused(parse(session(), project=PROJECT, realpath=realpath), "foreign-project")


def test_without_project_only_absoluteness_is_checked() -> None:
    ok(parse(session(header={**HEADER, "cwd": "/anywhere/at/all"})))


def test_programming_errors_raise() -> None:
    with pytest.raises(ValueError):
        parse(session(), project="relative")
    with pytest.raises(TypeError):
        parse("text")  # type: ignore[arg-type]


def test_parent_session_gives_forked_notice_and_is_never_opened() -> None:
    calls: list[str] = []

    def realpath(path: str) -> str:
        calls.append(path)
        return path

    header = {**HEADER, "parentSession": "/scratch/proj/.pi/state/s/sessions/old.jsonl"}
    p = ok(parse(session(msg("a", None), msg("b", "a"), msg("c", "a"), header=header),
                 project=PROJECT, realpath=realpath))
    assert p.forked_from_earlier_session and p.header.parent_session == header["parentSession"]
    assert [n.code for n in p.notices] == ["forked-from-earlier-session"]
    assert header["parentSession"] not in calls
    for branch in p.branches.values():
        assert branch.items[0].id == "x.forked" and branch.items[0].line == 1
    assert not ok(parse(session(msg("a", None)))).forked_from_earlier_session


# --- the snapshot: lines ----------------------------------------------------------------------------------


def test_trailing_partial_line_is_ignored_and_sets_incomplete() -> None:
    full = session(msg("a", None), msg("b", "a"))
    partial = full + json.dumps(msg("c", "b")).encode()[:-3]
    p, q = ok(parse(full)), ok(parse(partial))
    assert not p.incomplete and q.incomplete
    assert q.branches["main"].item_ids == p.branches["main"].item_ids == ("n.a", "n.b")
    assert q.unreadable_lines == ()
    # A complete JSON line without its LF is still partial (the seed's snapshot stops at the last LF).
    assert ok(parse(full + json.dumps(msg("c", "b")).encode())).branches["main"].item_ids == ("n.a", "n.b")


def test_lines_split_on_lf_only_separators_stay_inside_a_line() -> None:
    text = "line\u2028sep and para\u2029sep and nel\u0085 and \x0b\x0c\x1c"
    p = ok(parse(session(msg("a", None, text=text), msg("b", "a"))))
    assert texts(p, "main") == [f"n.a:{text}", "n.b:t"]
    assert p.line_count == 3


def test_one_trailing_cr_is_stripped() -> None:
    data = session(msg("a", None)).replace(b"\n", b"\r\n")
    p = ok(parse(data))
    assert texts(p, "main") == ["n.a:t"] and p.unreadable_lines == ()


def test_invalid_utf8_line_is_a_malformed_line() -> None:
    raw = json.dumps(msg("b", "a")).encode().replace(b'"t"', b'"\xed\xa0\x80"')  # an encoded surrogate
    p = ok(parse(session(msg("a", None), raw)))
    assert p.unreadable_lines == (3,) and "UTF-8" in p.branches["main"].items[-1].notice.message  # type: ignore[union-attr]


@pytest.mark.parametrize("raw", [b'{"type":"message","id":"b","x":NaN}', b'{"id":"b","x":-Infinity}',
                                 b"[" * 100_000 + b"]" * 100_000, b'{"id":"b","n":' + b"9" * 5000 + b"}"])
def test_non_json_values_are_malformed_lines_never_raise(raw: bytes) -> None:
    p = ok(parse(session(msg("a", None), raw)))
    assert p.unreadable_lines == (3,)


def test_lone_surrogates_are_carried_as_is() -> None:
    raw = b'{"type":"message","id":"b","parentId":null,"message":{"role":"user","content":"x\\ud800y"}}'
    p = ok(parse(session(raw)))
    assert texts(p, "main") == ["n.b:x\ud800y"]


# --- branches -----------------------------------------------------------------------------------------------


def test_header_only_file_has_branch_main_without_items() -> None:
    p = ok(parse(session()))
    assert list(p.branches) == ["main"] and p.default_branch == "main" and p.default_leaf is None
    main = p.branches["main"]
    assert main.leaf is None and main.items == () and main.item_count == 0
    check_invariants(p)


def test_first_root_line_is_main() -> None:
    p = ok(parse(session(entry("model_change", "m", None), msg("a", "m"), msg("b", "a"))))
    assert list(p.branches) == ["main"] and p.branches["main"].start == "n.m"
    assert p.branches["main"].leaf == "n.b" and texts(p, "main") == ["n.a:t", "n.b:t"]


def test_earliest_child_continues_its_parents_branch_later_child_starts_b_branch() -> None:
    # a -> b -> c, then forks back at a (d) and at b (e): main keeps the earliest children.
    p = ok(parse(session(msg("a", None), msg("b", "a"), msg("c", "b"), msg("d", "a"), msg("e", "b"),
                         msg("f", "d"))))
    assert list(p.branches) == ["main", "b.d", "b.e"]
    assert p.branches["main"].item_ids == ("n.a", "n.b", "n.c")
    assert p.branches["b.d"].item_ids == ("n.a", "n.d", "n.f")
    assert p.branches["b.e"].item_ids == ("n.a", "n.b", "n.e")
    assert (p.branches["b.d"].parent_branch, p.branches["b.d"].fork_point) == ("main", "n.a")
    assert (p.branches["b.e"].parent_branch, p.branches["b.e"].fork_point) == ("main", "n.b")
    assert p.entries["n.f"].branch == "b.d" and p.entries["n.b"].branch == "main"
    check_invariants(p)


def test_later_root_starts_its_own_branch() -> None:
    # Pi's resetLeaf: a second entry with parentId null (or no parentId key, FACTS loader quirk 4).
    no_key = msg("d", None)
    del no_key["parentId"]
    p = ok(parse(session(msg("a", None), msg("b", "a"), msg("c", None), no_key)))
    assert list(p.branches) == ["main", "b.c", "b.d"]
    assert p.branches["b.c"].item_ids == ("n.c",) and p.branches["b.c"].parent_branch is None
    assert p.default_branch == "b.d"


def test_branch_names_never_change_while_the_file_grows() -> None:
    lines = [msg("a", None), msg("b", "a"), msg("c", "a"), b"garbage", msg("d", "b"), msg("e", "c"),
             msg("f", None), msg("g", "a")]
    full = ok(parse(session(*lines)))
    for k in range(len(lines) + 1):
        part = ok(parse(session(*lines[:k])))
        for name, branch in part.branches.items():
            whole = full.branches[name].item_ids
            assert whole[: len(branch.item_ids)] == branch.item_ids, (k, name)


def test_each_leaf_ends_one_branch_and_inner_entries_are_not_branches() -> None:
    p = ok(parse(session(msg("a", None), msg("b", "a"), msg("c", "b"), msg("d", "b"))))
    assert {b.leaf for b in p.branches.values()} == {"n.c", "n.d"}
    assert "b.b" not in p.branches and "b.c" not in p.branches


def test_branch_name_uses_the_safe_id() -> None:
    p = ok(parse(session(msg("a", None), msg("b", "a"), msg("call_x|fc_y", "a"))))
    name = "b." + safe_id("call_x|fc_y")
    assert HASHED.fullmatch(name[2:]) and name in p.branches


# --- the default branch ------------------------------------------------------------------------------------


def test_default_branch_holds_the_last_valid_entry_in_file_order() -> None:
    lines = [msg("a", None), msg("b", "a"), msg("c", "a"), entry("thinking_level_change", "t", "b")]
    p = ok(parse(session(*lines)))
    assert p.default_leaf == "n.t" and p.default_branch == "main"
    p = ok(parse(session(*lines[:3])))
    assert p.default_leaf == "n.c" and p.default_branch == "b.c"
    # A malformed last line does not move it.
    assert ok(parse(session(*lines[:3], b"{oops"))).default_branch == "b.c"


def test_default_leaf_can_be_an_inner_entry() -> None:
    # A child written before its parent: the last line is an inner entry; its branch is the default.
    p = ok(parse(session(msg("a", None), msg("c", "b"), msg("b", "a"))))
    assert p.default_leaf == "n.b" and p.default_branch == "main"
    assert p.branches["main"].item_ids == ("n.a", "n.b", "n.c")


# --- malformed lines ----------------------------------------------------------------------------------------


def test_malformed_line_is_a_notice_at_its_position_on_every_branch_after_the_leaf_too() -> None:
    p = ok(parse(session(msg("a", None), b"{broken", msg("b", "a"), msg("c", "a"), b"", msg("d", "b"),
                         b"tail garbage")))
    assert p.unreadable_lines == (3, 6, 8)
    assert p.branches["main"].item_ids == ("n.a", "x.line-3", "n.b", "x.line-6", "n.d", "x.line-8")
    # b.c ends at line 5: the notices after its leaf are still on it, in file order.
    assert p.branches["b.c"].item_ids == ("n.a", "x.line-3", "n.c", "x.line-6", "x.line-8")
    notice = p.branches["b.c"].items[1].notice
    assert notice is not None and notice.code == "malformed-line" and notice.line == 3
    check_invariants(p)


@pytest.mark.parametrize(
    "raw",
    [b"42", b'"a string"', b"[]", b"null", b'{"hello":"world"}', b'{"type":"message","id":5}',
     json.dumps(HEADER).encode(), b"   ", b""],
)
def test_lines_that_are_not_entries_are_unreadable_lines(raw: bytes) -> None:
    # Pi would take truthy values as id-less entries and ignore a second header (FACTS loader quirk 4).
    p = ok(parse(session(msg("a", None), raw, msg("b", "a"))))
    assert p.unreadable_lines == (3,)
    assert p.branches["main"].item_ids == ("n.a", "x.line-3", "n.b")


# --- missing parents and loops ---------------------------------------------------------------------------------


def test_missing_parent_stops_the_history_and_is_never_joined_across_the_gap() -> None:
    p = ok(parse(session(msg("a", None), msg("b", "a"), msg("d", "c"), msg("e", "d"))))
    assert list(p.branches) == ["main", "b.d"]
    assert p.branches["main"].item_ids == ("n.a", "n.b")
    gapped = p.branches["b.d"]
    assert gapped.item_ids == ("x.gap-d", "n.d", "n.e") and gapped.parent_branch is None
    notice = gapped.items[0].notice
    assert notice is not None and notice.code == "missing-parent" and notice.lines == ()
    assert "'c'" in notice.message and "not joined" in notice.message
    assert p.entries["n.d"].parent is None and p.entries["n.d"].raw_parent_id == "c"
    assert p.default_branch == "b.d"
    check_invariants(p)


def test_missing_parent_notice_names_the_unreadable_lines_just_before_it() -> None:
    p = ok(parse(session(msg("a", None), b"x", msg("b", "a"), b'{"type":"message","id":"c","parentId":"b"',
                         b"\xff", msg("d", "c"))))
    assert p.unreadable_lines == (3, 5, 6)
    notice = p.branches["b.d"].items[-2].notice
    assert notice is not None and notice.lines == (5, 6) and "lines 5-6" in notice.message
    # Lines 5 and 6 are one run: one notice, x.line-5, through line 6.
    assert p.branches["b.d"].item_ids == ("x.line-3", "x.line-5", "x.gap-d", "n.d")
    run = p.branches["b.d"].items[1].notice
    assert run is not None and (run.line, run.through) == (5, 6) and "lines 5-6 (2 lines)" in run.message


def test_first_root_with_a_missing_parent_is_main() -> None:
    p = ok(parse(session(b"lost parent line", msg("b", "a"), msg("c", None))))
    assert p.branches["main"].item_ids == ("x.line-2", "x.gap-b", "n.b")
    assert p.branches["b.c"].item_ids == ("x.line-2", "n.c")


def test_a_parent_id_that_is_not_a_string_is_a_missing_parent() -> None:
    bad = msg("b", None)
    bad["parentId"] = 17
    p = ok(parse(session(msg("a", None), bad)))
    assert p.branches["b.b"].item_ids == ("x.gap-b", "n.b")


def test_a_loop_stops_the_history_with_a_notice() -> None:
    # a and b name each other; c hangs below; s names itself. Pi's getBranch would never return.
    p = ok(parse(session(msg("a", "b"), msg("b", "a"), msg("c", "b"), msg("s", "s"))))
    assert p.branches["main"].item_ids == ("x.loop-a", "n.a", "n.b", "n.c")
    assert p.branches["b.s"].item_ids == ("x.loop-s", "n.s")
    notice = p.branches["main"].items[0].notice
    assert notice is not None and notice.code == "loop" and notice.lines == (2, 3)
    check_invariants(p)


# --- duplicate ids -----------------------------------------------------------------------------------------------


def test_duplicate_ids_the_later_entry_wins() -> None:
    p = ok(parse(session(msg("a", None), msg("b", "a", text="earlier"), msg("c", "b"),
                         msg("b", "a", text="later"))))
    # c (line 4) was a child of the earlier b; it now hangs below the winner at line 5.
    assert p.default_leaf == "n.b" and p.default_branch == "main"
    assert texts(p, "main") == ["n.a:t", "n.b:later", "n.c:t"]
    assert "earlier" not in json.dumps([i.to_json() for b in p.branches.values() for i in b.items])
    assert p.superseded_lines == (3,)
    assert [(n.code, n.line, n.lines) for n in p.notices] == [("duplicate-id", 3, (5,))]
    assert p.entries["n.c"].parent == "n.b" and p.entries["n.b"].line == 5
    check_invariants(p)


def test_duplicate_id_changes_earlier_items_of_a_branch() -> None:
    # The reader refuses source-replaced here: the later entry moves the id to its own line.
    before = ok(parse(session(msg("a", None), msg("b", "a"), msg("c", "a"))))
    after = ok(parse(session(msg("a", None), msg("b", "a"), msg("c", "a"), msg("b", "a"))))
    assert before.branches["main"].item_ids == ("n.a", "n.b")
    assert after.branches["main"].item_ids == ("n.a", "n.c")
    assert after.branches["b.b"].item_ids == ("n.a", "n.b")


# --- what shows ------------------------------------------------------------------------------------------------------


def test_message_roles_render_with_their_blocks() -> None:
    user = msg("u", None)
    user["message"]["content"] = [{"type": "text", "text": "look"}, {"type": "image", "data": "QUJD",
                                                                      "mimeType": "image/png"}]
    plain = msg("p", "u")
    plain["message"]["content"] = "plain string content"
    assistant = msg("a", "p", role="assistant", stopReason="toolUse", provider="fakeprov", model="m", api="x")
    assistant["message"]["content"] = [
        {"type": "thinking", "thinking": "hmm", "thinkingSignature": "SIG"},
        {"type": "text", "text": "calling"},
        {"type": "toolCall", "id": "call_fake_2", "name": "bash", "arguments": {"command": "ls"}},
    ]
    result = {"type": "message", "id": "r", "parentId": "a", "timestamp": "T", "message": {
        "role": "toolResult", "toolCallId": "call_fake_2", "toolName": "bash", "isError": False,
        "content": [{"type": "text", "text": "out"}]}}
    bash = {"type": "message", "id": "x", "parentId": "r", "timestamp": "T", "message": {
        "role": "bashExecution", "command": "printf ok", "output": "ok", "exitCode": 0, "cancelled": False,
        "truncated": False}}
    items = ok(parse(session(user, plain, assistant, result, bash))).branches["main"].items
    assert [i.kind for i in items] == ["user", "user", "assistant", "toolResult", "bashExecution"]
    assert items[0].blocks == (TextBlock("look"), ImageBlock("image/png"))
    assert items[1].blocks == (TextBlock("plain string content"),)
    assert items[2].blocks == (ThinkingBlock("hmm"), TextBlock("calling"),
                               ToolCallBlock("call_fake_2", "bash", {"command": "ls"}))
    assert items[2].attrs == {"stopReason": "toolUse", "provider": "fakeprov", "model": "m", "api": "x"}
    assert items[3].attrs == {"toolCallId": "call_fake_2", "toolName": "bash", "isError": False}
    assert items[4].blocks == (CommandBlock("printf ok"), TextBlock("ok"))
    assert items[4].attrs == {"exitCode": 0, "cancelled": False, "truncated": False}
    assert all(i.timestamp == "2026-11-30T02:46:18.000Z" for i in items[:3]) and items[3].line == 5
    assert "SIG" not in json.dumps([i.to_json() for i in items])


def test_redacted_reasoning_is_unavailable_with_empty_text() -> None:
    assistant = msg("a", None, role="assistant")
    assistant["message"]["content"] = [
        {"type": "thinking", "thinking": "SECRET reasoning text", "thinkingSignature": "OPAQUE", "redacted": True},
        {"type": "text", "text": "answer"},
    ]
    item = ok(parse(session(assistant))).branches["main"].items[0]
    assert item.blocks == (UnavailableBlock(reason="redacted"), TextBlock("answer"))
    block = item.blocks[0]
    assert isinstance(block, UnavailableBlock) and block.text == ""
    dumped = json.dumps(item.to_json())
    assert "SECRET" not in dumped and "OPAQUE" not in dumped


def test_compaction_is_a_marker_in_place_and_the_full_history_stays() -> None:
    comp = entry("compaction", "k", "b", summary="earlier work", firstKeptEntryId="b", tokensBefore=5000,
                 details={}, usage=None, fromHook=False)
    p = ok(parse(session(msg("a", None), msg("b", "a"), comp, msg("c", "k"))))
    assert texts(p, "main") == ["n.a:t", "n.b:t", "n.k:earlier work", "n.c:t"]
    marker = p.branches["main"].items[2]
    assert marker.kind == "compaction" and marker.attrs == {"tokensBefore": 5000, "firstKeptEntryId": "n.b"}


def test_compaction_retained_tail_is_not_rendered_twice() -> None:
    tail = [msg("b", "a")["message"]]
    comp = entry("compaction", "k", "b", summary="s", firstKeptEntryId="b", tokensBefore=1, retainedTail=tail)
    p = ok(parse(session(msg("a", None), msg("b", "a", text="kept"), comp)))
    assert texts(p, "main") == ["n.a:t", "n.b:kept", "n.k:s"]


@pytest.mark.parametrize(
    "hidden",
    [
        entry("thinking_level_change", "h", "a", thinkingLevel="off"),
        entry("model_change", "h", "a", provider="p", modelId="m"),
        entry("label", "h", "a", targetId="a", label="checkpoint"),
        entry("session_info", "h", "a", name="My session"),
        {"type": "custom", "customType": "ext", "data": {"n": 1}, "id": "h", "parentId": "a", "timestamp": "T"},
        {"type": "custom_message", "customType": "ext", "content": "x", "display": False, "id": "h",
         "parentId": "a", "timestamp": "T"},
        {"type": "custom_message", "customType": "ext", "content": "x", "id": "h", "parentId": "a",
         "timestamp": "T"},
    ],
)
def test_hidden_entry_types_are_on_the_path_but_not_shown(hidden: dict[str, object]) -> None:
    p = ok(parse(session(msg("a", None), hidden, msg("b", "h"))))
    assert p.branches["main"].item_ids == ("n.a", "n.b")
    assert p.branches["main"].entry_ids == ("n.a", "n.h", "n.b")
    assert p.entries["n.h"].item is None


def test_custom_message_shows_only_with_display_true() -> None:
    shown = {"type": "custom_message", "customType": "ext", "content": [{"type": "text", "text": "hello"}],
             "display": True, "details": {}, "id": "m", "parentId": "a", "timestamp": "T"}
    item = ok(parse(session(msg("a", None), shown))).branches["main"].items[1]
    assert item.kind == "custom_message" and item.blocks == (TextBlock("hello"),)
    assert item.attrs == {"customType": "ext"}


def test_branch_summary_is_shown_as_a_marker() -> None:
    summ = entry("branch_summary", "s", "a", fromId="z", summary="tried A", details={}, fromHook=False)
    item = ok(parse(session(msg("a", None), summ))).branches["main"].items[1]
    assert item.kind == "branch_summary" and item.blocks == (TextBlock("tried A"),)
    assert item.attrs == {"fromId": "n.z"}


@pytest.mark.parametrize("etype", ["future_entry", None, 7, ["message"]])
def test_unknown_entry_type_becomes_a_notice(etype: object) -> None:
    odd = entry("x", "u", "a")
    odd["type"] = etype
    if etype is None:
        del odd["type"]
    p = ok(parse(session(msg("a", None), odd, msg("b", "u"))))
    assert p.branches["main"].item_ids == ("n.a", "x.type-u", "n.b")
    item = p.branches["main"].items[1]
    assert item.notice is not None and item.notice.code == "unknown-entry-type" and item.entry == "n.u"


@pytest.mark.parametrize("message", [{"role": "custom", "content": "x"}, {"role": "hookMessage"}, {},
                                     "not an object", None])
def test_unknown_role_becomes_a_notice(message: object) -> None:
    odd = entry("message", "u", "a", message=message)
    p = ok(parse(session(msg("a", None), odd)))
    assert p.branches["main"].item_ids == ("n.a", "x.role-u")
    notice = p.branches["main"].items[1].notice
    assert notice is not None and notice.code == "unknown-role"


def test_unknown_or_malformed_content_blocks_are_unsupported_never_raise() -> None:
    odd = msg("a", None, role="assistant")
    odd["message"]["content"] = [{"type": "audio"}, "str", {"text": "no type"}, {"type": "text", "text": 5},
                                 {"type": "toolCall", "id": 5, "name": None, "arguments": [1]},
                                 {"type": "thinking"}]
    other = msg("b", "a")
    other["message"]["content"] = {"not": "a list"}
    items = ok(parse(session(odd, other))).branches["main"].items
    assert items[0].blocks == (UnsupportedBlock("audio"), UnsupportedBlock("<block is 'str'>"),
                               UnsupportedBlock("<no type>"), UnsupportedBlock("text"),
                               ToolCallBlock(None, None, [1]), UnsupportedBlock("thinking"))
    assert items[1].blocks == (UnsupportedBlock("<content is an object>"),)


# --- ids ---------------------------------------------------------------------------------------------------------------


def test_ids_outside_the_chat01_pattern_are_hashed() -> None:
    call = "call_abc|fc_0123456789abcdef"  # OpenAI responses tool call id: the real case
    assistant = msg("e|1", None, role="assistant")
    assistant["message"]["content"] = [{"type": "toolCall", "id": call, "name": "bash", "arguments": {}}]
    result = entry("message", "r", "e|1", message={"role": "toolResult", "toolCallId": call, "toolName": "bash",
                                                  "content": [], "isError": False})
    items = ok(parse(session(assistant, result))).branches["main"].items
    hashed = safe_id(call)
    assert HASHED.fullmatch(hashed)
    assert items[0].blocks[0].id == hashed and items[1].attrs["toolCallId"] == hashed  # type: ignore[union-attr]
    assert items[0].id == "n." + safe_id("e|1") and HASHED.fullmatch(items[0].id[2:])
    assert is_chat01_id(items[0].id) and not is_chat01_id("e|1")


@pytest.mark.parametrize("raw", ["a" * 97, "a" * 200, "h-0123", "", "-lead", "ünï", "a\n", "x\ud800"])
def test_ids_that_would_not_fit_once_namespaced_are_hashed(raw: str) -> None:
    out = safe_id(raw)
    assert HASHED.fullmatch(out) and is_chat01_id("x.gap-" + out)


@pytest.mark.parametrize("raw", ["31125ff3", "a" * 96, "call_fake_2", "A.b:c-d_e"])
def test_short_chat01_ids_are_kept_verbatim(raw: str) -> None:
    assert safe_id(raw) == raw


def test_ids_are_namespaced_so_native_ids_cannot_collide_with_notices() -> None:
    # A native entry whose id spells a notice id, next to the malformed line that notice is about.
    p = ok(parse(session(msg("a", None), b"broken", msg("x.line-3", "a"), msg("x.gap-z", "x.line-3"))))
    ids = p.branches["main"].item_ids
    assert ids == ("n.a", "x.line-3", "n.x.line-3", "n.x.gap-z")
    assert len(set(ids)) == len(ids)
    check_invariants(p)


def test_notice_ids_are_stable_while_the_file_grows() -> None:
    lines = [msg("a", None), b"junk", msg("c", "lost"), msg("d", "c"), b"more junk"]
    first = ok(parse(session(*lines[:3])))
    grown = ok(parse(session(*lines)))
    assert first.branches["b.c"].item_ids == ("x.line-3", "x.gap-c", "n.c")
    assert grown.branches["b.c"].item_ids[:3] == first.branches["b.c"].item_ids


def test_safe_id_is_safe_opens_one_function() -> None:
    """Issue 31: the reader and the controller's client (which depends on safe-open alone) name a tool call by
    one function, so a live call and its history item always agree."""
    import mosaic.pi_format.ids as ids  # noqa: PLC0415
    import mosaic.safe_open.ids as bottom  # noqa: PLC0415

    assert safe_id is bottom.safe_id and ids.safe_id is bottom.safe_id
