"""The parser's rules (README, "Rules"), on transcripts made from the real entries of the recordings."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from helpers import data, dump, entry, joined, lines, ok, template, u

from mosaic.claude_format import TranscriptRefusal, first_entry_end, parse
from mosaic.claude_format.model import (
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    UnavailableBlock,
    UnsupportedBlock,
)

BRANCHY = "transcript-branch-resume-session-at.jsonl"


def _texts(p: Any, branch: str) -> list[str]:
    return [i.blocks[0].text if i.kind != "notice" else i.notice.code for i in p.branches[branch].items]


def _chain(n: int, start: int = 1, parent: str | None = None, **extra: Any) -> list[dict[str, Any]]:
    out = []
    for k in range(start, start + n):
        out.append(entry("user" if k % 2 else "assistant", u(k), parent, f"t{k}", **extra))
        parent = u(k)
    return out


# -- B1 part 5 / L2: the version ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.1.284", "2.1.269", "2.1.2830", " 2.1.283", None, 2.1283])
def test_L2_a_transcript_from_another_version_refuses_unsupported_harness(version: object) -> None:
    objs = lines(BRANCHY)
    for o in objs:
        if "uuid" in o:
            if version is None:
                o.pop("version")
            else:
                o["version"] = version
    result = parse(joined(objs))
    assert isinstance(result, TranscriptRefusal)
    assert (result.code, result.reconcile) == ("unsupported-harness", False)
    assert "line 3" in result.message and "2.1.283 only" in result.message


def test_L2_one_entry_of_another_version_anywhere_refuses_the_whole_transcript() -> None:
    objs = lines(BRANCHY)
    last_entry = max(k for k, o in enumerate(objs) if "uuid" in o)
    objs[last_entry]["version"] = "2.1.300"
    result = parse(joined(objs))
    assert isinstance(result, TranscriptRefusal) and result.code == "unsupported-harness"
    assert f"line {last_entry + 1}" in result.message
    # A sidechain (subagent) transcript is held to the same version.
    sub = lines("subagent-transcript.jsonl")
    sub[0]["version"] = "2.1.269"
    assert parse(joined(sub)) == TranscriptRefusal(
        "unsupported-harness", "line 1: an entry of version '2.1.269'; this reader reads Claude Code transcripts "
        "of version 2.1.283 only (B1 part 5)")


def test_meta_lines_carry_no_version_and_are_never_shown() -> None:
    p = ok(parse(data(BRANCHY)))
    for b in p.branches.values():
        assert all(i.kind != "notice" for i in b.items)
    assert p.line_count == 50 and p.entry_count == 25  # 25 meta lines: queue-operation, last-prompt, ...


# -- the project ------------------------------------------------------------------------------------------


def _with_cwd(cwd: object) -> bytes:
    objs = lines(BRANCHY)
    for o in objs:
        if "cwd" in o:
            o["cwd"] = cwd
    return joined(objs)


def test_the_first_entrys_cwd_must_be_the_project_or_inside_it(tmp_path: Any) -> None:
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (tmp_path / "proj-other").mkdir()
    real = os.path.realpath(proj)
    assert ok(parse(_with_cwd(real), project=real, realpath=os.path.realpath)).cwd == real
    assert ok(parse(_with_cwd(real + "/sub"), project=real, realpath=os.path.realpath))
    for cwd in (real + "-other", "<scratch>/wa", None, 7, real + "/../proj-other"):
        refused = parse(_with_cwd(cwd), project=real, realpath=os.path.realpath)
        assert isinstance(refused, TranscriptRefusal) and refused.code == "foreign-project", cwd
    link = tmp_path / "link"
    link.symlink_to(proj)
    assert ok(parse(_with_cwd(str(link)), project=real, realpath=os.path.realpath))  # real paths compared
    assert isinstance(parse(_with_cwd(str(link)), project=real), TranscriptRefusal)  # lexically: outside


def test_a_cwd_realpath_cannot_resolve_is_foreign_project_and_without_a_project_none_is_checked() -> None:
    def broken(path: str) -> str:
        raise ValueError("embedded null byte")

    refused = parse(_with_cwd("/p/x"), project="/p", realpath=broken)
    assert isinstance(refused, TranscriptRefusal) and refused.code == "foreign-project"
    assert ok(parse(_with_cwd("<scratch>/wa"))).cwd == "<scratch>/wa"


def test_programming_errors_raise() -> None:
    with pytest.raises(TypeError):
        parse("text")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        parse(b"", project="relative/path")


# -- the leaf rule (FACTS §2, the T runs) ------------------------------------------------------------------


def _without_last_prompt(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o.get("type") != "last-prompt"]


def test_L1_without_last_prompt_the_default_leaf_is_the_last_entry_in_file_order_T8() -> None:
    p = ok(parse(joined(_without_last_prompt(lines(BRANCHY)))))
    assert (p.default_leaf, p.leaf_rule) == ("n.e2af9955-d798-47a2-aa80-880e87b598a8", "last-uuid-entry")


def test_L1_timestamps_never_choose_the_leaf_T9() -> None:
    objs = _without_last_prompt(lines(BRANCHY))
    edit = False
    for o in objs:
        edit = edit or (o.get("type") == "user" and o["message"]["content"] == "edit two")
        if edit and "timestamp" in o:
            o["timestamp"] = "2020-01-01T00:00:00.000Z"
    assert ok(parse(joined(objs))).default_leaf == "n.e2af9955-d798-47a2-aa80-880e87b598a8"


def test_L1_file_order_chooses_even_when_the_older_branch_is_moved_to_the_end_T10() -> None:
    objs = _without_last_prompt(lines(BRANCHY))
    cut = next(k for k, o in enumerate(objs) if o.get("type") == "user" and o["message"]["content"] == "after branch T")
    objs = objs[:cut]  # up to "edit two"'s turn, as T10 was made before "after branch T"
    two = next(k for k, o in enumerate(objs) if o.get("type") == "queue-operation" and o.get("content") == "two")
    edit = next(k for k, o in enumerate(objs) if o.get("type") == "queue-operation" and o.get("content") == "edit two")
    moved = objs[:two] + objs[edit:] + objs[two:edit]  # turns two and three after the edit branch
    p = ok(parse(joined(moved)))
    assert p.default_leaf == "n.da31f2cb-c6e5-44ab-8047-fa171c00d30e" and p.default_branch == "main"


def test_L1_the_last_last_prompt_with_a_string_leaf_wins_and_an_unknown_leaf_falls_back() -> None:
    objs = lines(BRANCHY)
    lp = dict(next(o for o in objs if o.get("type") == "last-prompt"))
    older = {**lp, "leafUuid": "da31f2cb-c6e5-44ab-8047-fa171c00d30e"}
    assert ok(parse(joined([*objs, older]))).default_branch == "main"
    assert ok(parse(joined([*objs, older, {**lp, "leafUuid": 5}]))).default_branch == "main"
    gone = ok(parse(joined([*objs, {**lp, "leafUuid": "ffffffff-0000-4000-8000-000000000000"}])))
    assert (gone.default_leaf, gone.leaf_rule) == ("n.e2af9955-d798-47a2-aa80-880e87b598a8", "last-uuid-entry")


def test_L1_a_leaf_that_is_an_inner_entry_picks_the_branch_that_holds_it() -> None:
    objs = lines(BRANCHY)
    lp = next(o for o in objs if o.get("type") == "last-prompt")
    p = ok(parse(joined([*objs, {**lp, "leafUuid": "c80be42e-5cc2-4176-bf32-7b8d6e65227a"}])))
    assert (p.default_branch, p.default_leaf) == ("main", "n.c80be42e-5cc2-4176-bf32-7b8d6e65227a")


# -- the tree ---------------------------------------------------------------------------------------------


def test_earliest_child_continues_its_parents_branch_later_child_and_later_root_start_b_branches() -> None:
    objs = [*_chain(3), entry("user", u(10), u(2), "fork"), entry("user", u(20), None, "again")]
    p = ok(parse(joined(objs)))
    assert list(p.branches) == ["main", f"b.{u(10)}", f"b.{u(20)}"]
    assert _texts(p, "main") == ["t1", "t2", "t3"]
    assert _texts(p, f"b.{u(10)}") == ["t1", "t2", "fork"]
    fork = p.branches[f"b.{u(10)}"]
    assert (fork.parent_branch, fork.fork_point, fork.leaf) == ("main", f"n.{u(2)}", f"n.{u(10)}")
    assert p.branches[f"b.{u(20)}"].parent_branch is None
    assert p.default_branch == f"b.{u(20)}"  # the last entry in file order


def test_missing_parent_stops_the_history_with_a_notice_and_is_never_joined_across_the_gap() -> None:
    objs = _chain(2)
    body = joined(objs) + b"{broken\n\n" + dump(entry("user", u(5), u(4), "after the gap"))
    p = ok(parse(body))
    assert _texts(p, "main") == ["t1", "t2", "malformed-line"]
    orphan = p.branches[f"b.{u(5)}"]
    assert orphan.parent_branch is None
    items = orphan.items
    gap = items[1]
    assert gap.id == f"x.gap-{u(5)}" and gap.notice is not None and gap.notice.code == "missing-parent"
    assert gap.notice.lines == (3, 4) and "3-4" in gap.notice.message
    assert [i.kind for i in items] == ["notice", "notice", "user"] and items[0].notice.code == "malformed-line"


def test_a_parent_uuid_that_is_not_a_string_is_a_missing_parent() -> None:
    p = ok(parse(joined([*_chain(1), entry("user", u(2), None, "x", parentUuid=["no"])])))
    assert p.branches[f"b.{u(2)}"].items[0].notice.code == "missing-parent"  # type: ignore[union-attr]


def test_a_loop_is_cut_once_at_its_earliest_member_with_a_notice() -> None:
    objs = [entry("user", u(1), u(3), "a"), entry("assistant", u(2), u(1), "b"), entry("user", u(3), u(2), "c"),
            entry("user", u(4), u(4), "self")]
    p = ok(parse(joined(objs)))
    assert _texts(p, "main") == ["loop", "a", "b", "c"]
    assert p.branches["main"].items[0].notice.lines == (1, 2, 3)  # type: ignore[union-attr]
    assert _texts(p, f"b.{u(4)}") == ["loop", "self"]


def test_duplicate_uuids_the_later_line_wins_and_children_of_the_earlier_hang_below_it() -> None:
    objs = [*_chain(2), entry("user", u(3), u(2), "old three"), entry("assistant", u(4), u(3), "under old"),
            entry("user", u(3), u(2), "new three")]
    p = ok(parse(joined(objs)))
    assert _texts(p, "main") == ["t1", "t2", "new three", "under old"]
    assert p.superseded_lines == (3,)
    assert [n.to_json()["id"] for n in p.notices] == ["x.dup-3"] and p.notices[0].lines == (5,)


def test_other_entry_types_with_a_uuid_are_notices_in_place_and_keep_the_tree() -> None:
    system = {**entry("user", u(2), u(1)), "type": "system", "subtype": "compact_boundary"}
    system.pop("message")
    progress = {**entry("user", u(3), u(2)), "type": "progress"}
    objs = [*_chain(1), system, progress, entry("assistant", u(4), u(3), "after")]
    p = ok(parse(joined(objs)))
    items = p.branches["main"].items
    assert [i.kind for i in items] == ["user", "notice", "notice", "assistant"]
    assert items[1].id == f"x.type-{u(2)}" and items[1].entry == f"n.{u(2)}"
    assert "'system'" in items[1].notice.message  # type: ignore[union-attr]


def test_uuid_less_lines_of_unknown_type_are_notices_on_every_branch_and_meta_lines_are_nothing() -> None:
    meta = [{"type": t, "sessionId": "s"} for t in ("queue-operation", "atis-latch", "cost-state", "mode")]
    summary = {"type": "summary", "summary": "A summary", "leafUuid": u(2)}
    objs = [*_chain(2), *meta, summary, entry("user", u(9), u(1), "fork")]
    p = ok(parse(joined(objs)))
    for name in ("main", f"b.{u(9)}"):
        notices = [i for i in p.branches[name].items if i.kind == "notice"]
        assert [(i.id, i.notice.code) for i in notices] == [("x.line-7", "unknown-entry-type")]  # type: ignore[union-attr]
        assert "'summary'" in notices[0].notice.message  # type: ignore[union-attr]
    assert _texts(p, f"b.{u(9)}") == ["t1", "unknown-entry-type", "fork"]


def test_L5_sidechain_entries_in_the_main_file_are_kept_apart_from_the_main_branch() -> None:
    """What older versions wrote into the main file: sidechain entries, even one that names a main entry
    as its parent, form branches of their own; main is never merged with them, and the default leaf by
    file order skips them."""
    main = lines("transcript-agent-and-bash.jsonl")
    main = [o for o in main if o.get("type") != "last-prompt"]
    sub = lines("subagent-transcript.jsonl")
    sub[0]["parentUuid"] = "dc7aee27-3b03-41db-a250-cd5d856d6732"  # the Agent call of the main file
    clean = ok(parse(joined(main)))
    p = ok(parse(joined(main + sub)))
    assert p.branches["main"].items == clean.branches["main"].items
    assert p.default_branch == "main" and p.default_leaf == clean.default_leaf  # file order skips sidechains
    side = p.branches[f"b.{sub[0]['uuid']}"]
    assert side.sidechain and side.parent_branch is None and side.fork_point is None
    assert [i.kind for i in side.items] == ["user", "assistant"]
    assert all(i.attrs.get("sidechain") is True for i in side.items)
    # A main entry under a sidechain entry is cut from it too: main stays as it was.
    p = ok(parse(joined([*main, *sub, entry("user", u(1), sub[-1]["uuid"], "main after sidechain")])))
    assert p.branches["main"].items == clean.branches["main"].items
    back = p.branches[f"b.{u(1)}"]
    assert not back.sidechain and back.parent_branch is None and [i.kind for i in back.items] == ["user"]


def test_L5_main_is_the_first_root_that_is_not_a_sidechain() -> None:
    sub = lines("subagent-transcript.jsonl")
    p = ok(parse(joined([*sub, *_chain(2)])))
    assert _texts(p, "main") == ["t1", "t2"] and not p.branches["main"].sidechain
    assert p.branches[f"b.{sub[0]['uuid']}"].sidechain


# -- lines ------------------------------------------------------------------------------------------------


def test_only_complete_lines_are_read_and_a_partial_one_sets_incomplete() -> None:
    body = joined(_chain(2))
    p = ok(parse(body + b'{"type":"user","uuid":"x'))
    assert p.incomplete and p.line_count == 2 and _texts(p, "main") == ["t1", "t2"]
    empty = ok(parse(b""))
    assert list(empty.branches) == ["main"] and empty.default_leaf is None and empty.leaf_rule is None
    assert empty.branches["main"].item_count == 0 and empty.version is None


def test_lines_split_on_lf_only_one_cr_stripped_separators_stay_inside() -> None:
    one = entry("user", u(1), None, "a\u2028b\u2029c\x85d")
    body = dump(one).replace(b"\n", b"\r\n") + dump(entry("assistant", u(2), u(1), "e"))
    p = ok(parse(body))
    assert _texts(p, "main") == ["a\u2028b\u2029c\x85d", "e"] and p.line_count == 2


def test_unreadable_lines_are_one_notice_per_run_on_every_branch_at_their_position() -> None:
    body = (dump(entry("user", u(1), None, "a")) + b"\n \n\t\r\n" + b'{"x":NaN}\n[1]\n\xff\xfe{}\n'
            + dump(entry("assistant", u(2), u(1), "b")) + b"{\n" + dump(entry("user", u(3), u(1), "fork")))
    p = ok(parse(body))
    assert list(p.unreadable_runs()) == [(2, 6), (9, 1)]
    assert list(p.unreadable_lines) == [2, 3, 4, 5, 6, 7, 9]
    for name in ("main", f"b.{u(3)}"):
        notices = [i.notice for i in p.branches[name].items if i.notice is not None]
        assert [(n.id, n.line, n.through) for n in notices] == [("x.line-2", 2, 7), ("x.line-9", 9, 9)]
    assert _texts(p, f"b.{u(3)}") == ["a", "malformed-line", "malformed-line", "fork"]
    assert _texts(p, "main") == ["a", "malformed-line", "b", "malformed-line"]


def test_lone_surrogates_are_carried() -> None:
    line = dump(entry("user", u(1), None, "x")).replace(b'"content":"x"', b'"content":"a\\ud800b"')
    assert _texts(ok(parse(line)), "main") == ["a\ud800b"]


def test_nesting_too_deep_is_an_unreadable_line_never_a_crash() -> None:
    deep = b'{"uuid":"' + u(1).encode() + b'","a":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    p = ok(parse(deep + dump(entry("user", u(2), None, "after"))))
    assert list(p.unreadable_runs()) == [(1, 1)] and _texts(p, "main") == ["malformed-line", "after"]


# -- rendering --------------------------------------------------------------------------------------------


def test_content_blocks_render_inert_and_unknown_or_malformed_blocks_are_unsupported() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    user = entry("user", u(1), None)
    user["message"]["content"] = [{"type": "text", "text": "<b>look</b>"}, image, {"type": "document"}, 7]
    asst = entry("assistant", u(2), u(1))
    asst["message"]["content"] = [{"type": "thinking", "thinking": "hmm", "signature": "SIG"},
                                  {"type": "redacted_thinking", "data": "opaque"},
                                  {"type": "tool_use", "id": "call_x|fc_y", "name": "Read", "input": {"p": 1}},
                                  {"type": "text", "text": 5}]
    result = entry("user", u(3), u(2))
    result["message"]["content"] = [{"type": "tool_result", "tool_use_id": "call_x|fc_y", "is_error": True,
                                     "content": [{"type": "text", "text": "no"}, image]}]
    items = ok(parse(joined([user, asst, result]))).branches["main"].items
    assert items[0].blocks == (TextBlock("<b>look</b>"), ImageBlock("image/png"), UnsupportedBlock("document"),
                               UnsupportedBlock("block a number"))
    assert items[1].blocks[:2] == (ThinkingBlock("hmm"), UnavailableBlock("redacted"))
    call = items[1].blocks[2]
    assert call.id.startswith("h-") and call.name == "Read" and call.arguments == {"p": 1}  # type: ignore[union-attr]
    assert items[1].blocks[3] == UnsupportedBlock("text")
    assert "SIG" not in json.dumps(items[1].to_json()) and "opaque" not in json.dumps(items[1].to_json())
    assert items[2].kind == "toolResult" and dict(items[2].attrs) == {"toolCallId": call.id, "isError": True}  # type: ignore[union-attr]
    assert items[2].blocks == (TextBlock("no"), ImageBlock("image/png"))


def test_a_message_that_cannot_be_rendered_is_an_unknown_role_notice_in_place() -> None:
    bad = entry("user", u(2), u(1))
    bad["message"] = "not an object"
    wrong = entry("assistant", u(3), u(2))
    wrong["message"]["role"] = "user"
    p = ok(parse(joined([*_chain(1), bad, wrong, entry("user", u(4), u(3), "go on")])))
    items = p.branches["main"].items
    assert [(i.kind, i.id) for i in items[1:3]] == [("notice", f"x.role-{u(2)}"), ("notice", f"x.role-{u(3)}")]
    assert items[3].blocks == (TextBlock("go on"),)


def test_ids_outside_the_chat01_pattern_are_hashed_and_namespaced() -> None:
    odd = "id with spaces/and|bars"
    p = ok(parse(joined([entry("user", odd, None, "a"), entry("user", "h-looks-hashed", None, "b")])))
    first, second = (p.branches[name].items[0].id for name in p.branches)
    assert first.startswith("n.h-") and len(first) == 44 and second.startswith("n.h-")
    assert all(name == "main" or name.startswith("b.h-") for name in p.branches)


def test_template_entries_are_real_lines() -> None:
    assert template("attachment:prompt_snapshot")["attachment"]["type"] == "prompt_snapshot"


def test_first_entry_end_is_the_head_the_catalogue_reads() -> None:
    body = data(BRANCHY)
    lines = body.splitlines(keepends=True)
    head = sum(len(x) for x in lines[:3])  # two queue-operation lines, then the first user entry
    assert first_entry_end(body) == head
    assert first_entry_end(body, head) == head + len(lines[3])  # from a line start on: the next entry
    assert first_entry_end(body[: head - 1]) is None  # the entry's line is not complete yet
    assert first_entry_end(b'{"type":"mode"}\n\n{bad\n') is None
    surrogate = b'{"uuid":"a\\ud800","type":"user"}\n'
    assert first_entry_end(surrogate) == len(surrogate)
    p = ok(parse(body[:head], project=None))
    assert p.created_at == lines_created_at()


def lines_created_at() -> str:
    return str(next(o for o in lines(BRANCHY) if "uuid" in o)["timestamp"])
