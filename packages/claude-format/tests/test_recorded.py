"""The recorded transcripts of the pinned binary (tests/data, README there): what each shows, and the leaf
rule held to what `--resume` really continued in them (FACTS §2 "Which leaf --resume continues")."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers import DATA, RECORDED, data, lines, ok

from mosaic.claude_format import parse

SHA256 = {
    "transcript-agent-and-bash.jsonl": "ab150ef5bd459ecd900d84a234221732ff0b59946d6b84b11875fe195f8e9b2b",
    "subagent-transcript.jsonl": "aa4f44275c59b916403f304049607085949efb00882fe327b1b6ca26d31a7d75",
    "subagent.meta.json": "164161e482a20fa1e85a9b61fa799d0020e4577011d4f489a8b4c0801bfab361",
    "transcript-branch-resume-session-at.jsonl": "ea59db44bf7d5e8b9799e0e61cda132fa1b7f91ea548dc90ac26ba8262f4af27",
    "transcript-fork-session.jsonl": "d1c8ba935dcd9d77435f0dedca4fe961c459dd7fa45b3a4739826867d422cf8f",
    "transcript-T7-lastprompt-edited-then-resumed.jsonl":
        "f9384f1ac328b9c3847536c43626d576cd0d0a48229b7123dbeb68c286080ad4",
}

#: The user entries a plain `--resume <id>` or `--continue` appended (FACTS §2, the T runs): (file, line).
#: The binary gave each the parent it continued; `--resume-session-at` (line 36 of the branch file) chose
#: its parent explicitly and is not among them.
RESUMED = [
    ("transcript-branch-resume-session-at.jsonl", 21),  # --resume two
    ("transcript-branch-resume-session-at.jsonl", 29),  # --continue three
    ("transcript-branch-resume-session-at.jsonl", 46),  # --resume "after branch T": the edit branch's leaf
    ("transcript-T7-lastprompt-edited-then-resumed.jsonl", 21),
    ("transcript-T7-lastprompt-edited-then-resumed.jsonl", 29),
    ("transcript-T7-lastprompt-edited-then-resumed.jsonl", 48),  # the older branch: last-prompt was edited
]

#: The sessionId the fork file's entries carry (a new session; the uuids are the source's).
SESSION_FORK = "bb4b5961-7b1a-4357-b594-aab4f933dd44"


def test_the_data_is_the_recordings() -> None:
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in DATA.iterdir() if p.suffix != ".md"} == SHA256


@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_transcript_parses_at_the_pinned_version(name: str) -> None:
    p = ok(parse(data(name)))
    assert p.version == "2.1.283" and not p.incomplete and not p.unreadable_lines and not p.notices
    assert p.line_count == len(lines(name))
    # Every entry with a uuid is on some branch; attachments are on the path and never shown.
    uuids = {o["uuid"] for o in lines(name) if "uuid" in o}
    on_paths = {e for b in p.branches.values() for e in b.entry_ids}
    assert on_paths == {f"n.{x}" for x in uuids}


@pytest.mark.parametrize(("name", "line"), RESUMED)
def test_L1_the_default_leaf_of_each_prefix_is_the_entry_resume_continued(name: str, line: int) -> None:
    """B1 part 4 on the binary's own evidence: parse the file as it was just before a `--resume` (or
    `--continue`) appended its user entry; the default leaf the parser picks is that entry's parent."""
    objs = lines(name)
    raw = data(name).splitlines(keepends=True)
    prefix = b"".join(raw[: line - 1])
    resumed = objs[line - 1]
    assert resumed["type"] == "user" and isinstance(resumed["message"]["content"], str)
    p = ok(parse(prefix))
    assert p.default_leaf == f"n.{resumed['parentUuid']}"
    assert p.leaf_rule == "last-prompt"


def test_L1_a_fork_session_continues_the_leaf_the_parser_picks_in_the_source_file() -> None:
    """`--resume 1111… --fork-session` after `three`: the new file's first new user entry hangs on the leaf
    the parser picks in the source file as it was then (before "edit two", line 34)."""
    source = b"".join(data("transcript-branch-resume-session-at.jsonl").splitlines(keepends=True)[:33])
    fork = lines("transcript-fork-session.jsonl")
    first_new = next(o for o in fork if o.get("type") == "user" and o["message"]["content"] == "fork four")
    assert ok(parse(source)).default_leaf == f"n.{first_new['parentUuid']}"


def test_L1_the_edit_branch_is_the_default_and_the_older_branch_opens_by_name() -> None:
    p = ok(parse(data("transcript-branch-resume-session-at.jsonl")))
    assert list(p.branches) == ["main", "b.a95e6e6d-b1e7-4b14-80c7-bc48c9655fd3"]
    assert p.default_branch == "b.a95e6e6d-b1e7-4b14-80c7-bc48c9655fd3"
    texts = {name: [i.blocks[0].text for i in b.items if i.kind == "user"]  # type: ignore[union-attr]
             for name, b in p.branches.items()}
    assert texts == {"main": ["one", "two", "three"],
                     "b.a95e6e6d-b1e7-4b14-80c7-bc48c9655fd3": ["one", "edit two", "after branch T"]}
    edit = p.branches["b.a95e6e6d-b1e7-4b14-80c7-bc48c9655fd3"]
    assert (edit.parent_branch, edit.fork_point) == ("main", "n.f14d0aef-2e01-42f0-81f5-cd339d1ecf91")


def test_L1_T7_the_last_prompt_names_the_older_branch_and_it_is_the_default() -> None:
    p = ok(parse(data("transcript-T7-lastprompt-edited-then-resumed.jsonl")))
    assert p.default_branch == "main"
    assert p.default_leaf == "n.57d48816-9f86-4689-8daa-927a79cdb305"


def test_a_fork_file_reads_as_its_own_transcript_with_the_same_uuids() -> None:
    p = ok(parse(data("transcript-fork-session.jsonl")))
    assert list(p.branches) == ["main"]
    users = [i.blocks[0].text for i in p.branches["main"].items if i.kind == "user"]  # type: ignore[union-attr]
    assert users == ["one", "two", "three", "fork four"]
    assert p.session_id == SESSION_FORK


def test_tool_calls_results_and_the_task_notification_render_from_the_recording() -> None:
    p = ok(parse(data("transcript-agent-and-bash.jsonl")))
    items = p.branches["main"].items
    assert [i.kind for i in items] == ["user", "assistant", "toolResult", "assistant", "user", "assistant",
                                       "user", "assistant", "toolResult", "assistant"]
    bash = items[7].blocks[0]
    assert bash.to_json() == {"kind": "toolCall", "id": "toolu_0024", "name": "Bash",
                              "arguments": {"command": "echo hi-from-bash", "description": "scripted bash"}}
    assert dict(items[8].attrs) == {"toolCallId": "toolu_0024", "isError": False}
    assert items[8].blocks[0].to_json() == {"kind": "text", "text": "hi-from-bash"}
    assert dict(items[4].attrs) == {"origin": "task-notification"}
    assert dict(items[7].attrs) == {"stopReason": "tool_use", "model": "claude-opus-5-5", "messageId": "msg_0024"}


@pytest.mark.parametrize("name", RECORDED)
def test_attachments_and_the_system_prompt_are_never_rendered_as_conversation(name: str) -> None:
    """The prompt_snapshot attachment holds the full system prompt; no attachment is ever an item."""
    p = ok(parse(data(name)))
    attachments = {f"n.{o['uuid']}" for o in lines(name) if o.get("type") == "attachment"}
    assert attachments
    for b in p.branches.values():
        assert not {i.id for i in b.items} & attachments
        assert not {i.entry for i in b.items} & attachments  # not even as a notice in its place
        shown = json.dumps([i.to_json() for i in b.items])
        assert "You are an interactive agent" not in shown and "system-reminder" not in shown


def test_L5_the_subagent_transcript_reads_apart_and_the_main_file_holds_none_of_it() -> None:
    main = ok(parse(data("transcript-agent-and-bash.jsonl")))
    sub = ok(parse(data("subagent-transcript.jsonl")))
    sub_ids = {f"n.{o['uuid']}" for o in lines("subagent-transcript.jsonl")}
    assert not sub_ids & {e for b in main.branches.values() for e in b.entry_ids}
    assert list(sub.branches) == ["main"] and sub.branches["main"].sidechain
    items = sub.branches["main"].items
    assert [i.kind for i in items] == ["user", "assistant"]
    assert all(i.attrs["sidechain"] is True and i.attrs["agentId"] == "a9b91611f40df3f31" for i in items)
    assert not any(i.attrs.get("sidechain") for b in main.branches.values() for i in b.items)
