"""The committed transcript trees of the pinned binary (brief §8 B1 part 4), read as evidence.

The layout is the contract with the reader (fixtures/README.md "Claude Code 2.1.283"): receipts under
`proj/.pi/state/alpha/`, transcripts under `claude/projects/<slug>/`, `expected.json`. The leaf rule
(docs/claude-2.1.283.md "Which leaf --resume continues"): the `leafUuid` of the last `last-prompt` line, else
the last entry with a `uuid` in file order; each tree's `expected.json` holds the parent the binary's own
`--resume` gave the next user entry, and the rule must pick that entry in the committed file. The smoke
suite makes the trees again and proves the rule on the binary once more (tests_smoke/test_trees_real.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, TREES

from mosaic.claude_rpc.testing.trees import SEAT, entries, entry_types, leaf_by_rule
from mosaic.claude_rpc.testing.trees import TREES as MADE

UUID_LINE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n")
NAMES = [t.name for t in MADE]


def expected(tree: str) -> dict[str, Any]:
    return dict(json.loads((TREES / tree / "expected.json").read_text()))


def transcript(tree: str, session: str | None = None) -> Path:
    exp = expected(tree)
    return TREES / tree / "claude" / "projects" / exp["slug"] / f"{session or exp['sessionId']}.jsonl"


def uuids(lines: list[dict[str, Any]]) -> list[str]:
    return [d["uuid"] for d in lines if isinstance(d.get("uuid"), str)]


def text_of(d: dict[str, Any]) -> Any:
    return (d.get("message") or {}).get("content")


def test_the_committed_trees_are_the_makers() -> None:
    assert sorted(p.name for p in TREES.iterdir()) == sorted(NAMES)


@pytest.mark.parametrize("tree", NAMES)
def test_each_tree_is_a_project_root_with_receipts_transcripts_and_expected(tree: str) -> None:
    base = TREES / tree
    exp = expected(tree)
    assert set(exp) == {"seat", "sessionId", "resumeContinuedParent", "leafRule", "launches", "decoys", "cwd", "slug"}
    state = base / "proj" / ".pi" / "state" / SEAT
    receipts = [(state / "launches" / str(n) / "session-id").read_text() for n in range(1, len(exp["launches"]) + 1)]
    assert sorted(p.name for p in (state / "launches").iterdir()) == sorted(str(n) for n in range(1, len(receipts) + 1))
    assert all(UUID_LINE.fullmatch(r) for r in receipts) and [r.strip() for r in receipts] == exp["launches"]
    assert (state / "session-id").read_text() == exp["launches"][-1] + "\n" == exp["sessionId"] + "\n"
    top = {p.relative_to(base).parts[0] for p in base.rglob("*") if p.is_file()}
    assert top == {"proj", "claude", "expected.json"}
    assert [p.name for p in (base / "claude").iterdir()] == ["projects"]
    assert [p.name for p in (base / "claude" / "projects").iterdir()] == [exp["slug"]]
    for session in {*exp["launches"], *exp["decoys"]}:  # each id resolves to exactly one file
        assert len(list((base / "claude").rglob(f"{session}.jsonl"))) == 1
    assert exp["cwd"].startswith("/tmp/mosaic-claude-fixtures/trees/") and exp["cwd"].endswith("/proj")


@pytest.mark.parametrize("tree", NAMES)
def test_the_leaf_rule_picks_what_resume_continued(tree: str) -> None:
    exp = expected(tree)
    rule, leaf = leaf_by_rule(entries(transcript(tree)))
    assert (rule, leaf) == (exp["leafRule"], exp["resumeContinuedParent"])
    lines = entries(transcript(tree))
    assert leaf in uuids(lines)
    assert not any(text_of(d) == "resume check" for d in lines), "the resume check's turn was kept"


@pytest.mark.parametrize("tree", NAMES)
def test_every_entry_with_a_uuid_carries_the_pinned_version_and_the_meta_lines_none(tree: str) -> None:
    for path in (TREES / tree / "claude").rglob("*.jsonl"):
        for d in entries(path):
            if isinstance(d.get("uuid"), str):
                assert d["version"] == "2.1.283" and d["sessionId"] == path.stem or "subagents" in path.parts
            else:
                assert "version" not in d and d["type"] in {"queue-operation", "last-prompt", "atis-latch",
                                                            "cost-state", "mode"}, d["type"]


def test_linear_holds_text_a_bash_call_and_a_background_subagent_in_its_own_file() -> None:
    exp = expected("linear")
    lines = entries(transcript("linear"))
    tools = [b for d in lines if d["type"] == "assistant" for b in text_of(d) if b.get("type") == "tool_use"]
    assert [t["name"] for t in tools] == ["Bash", "Agent"]
    results = [d["toolUseResult"] for d in lines if "toolUseResult" in d]
    assert results[0]["stdout"] == "linear-bash-ran" and results[1]["status"] == "async_launched"
    subdir = transcript("linear").with_suffix("") / "subagents"
    agent = results[1]["agentId"]
    sub = entries(subdir / f"agent-{agent}.jsonl")
    meta = json.loads((subdir / f"agent-{agent}.meta.json").read_text())
    assert meta["agentType"] == "general-purpose" and meta["toolUseId"] == tools[1]["id"]
    assert all(d.get("isSidechain") is True and d.get("agentId") == agent for d in sub if "uuid" in d)
    assert sub[0]["parentUuid"] is None and text_of(sub[0]) == "SUBTASK reply please"
    assert not set(uuids(sub)) & set(uuids(lines)), "subagent entries in the main file"
    assert all(d.get("isSidechain") is False for d in lines if "uuid" in d)
    assert len(exp["decoys"]) == 1 and exp["decoys"][0] not in exp["launches"]
    decoy = entries(transcript("linear", exp["decoys"][0]))
    assert [text_of(d) for d in decoy if d["type"] == "user"] == ["a decoy session nobody launched"]


def test_fork_writes_a_second_file_with_the_same_uuids_and_the_receipt_names_the_fork() -> None:
    exp = expected("fork")
    original, forked = exp["launches"][0], exp["launches"][2]
    assert exp["launches"][1] == original and forked != original and exp["sessionId"] == forked
    first, second = entries(transcript("fork", original)), entries(transcript("fork", forked))
    assert set(uuids(first)) <= set(uuids(second))
    assert {d["sessionId"] for d in second} == {forked}
    assert [text_of(d) for d in first if d["type"] == "user"] == ["one", "two"]
    assert [text_of(d) for d in second if d["type"] == "user"] == ["one", "two", "fork three"]


def _children(lines: list[dict[str, Any]]) -> Counter[str]:
    return Counter(d["parentUuid"] for d in lines if isinstance(d.get("uuid"), str) and d.get("parentUuid"))


def test_edit_branch_holds_two_branches_in_one_file_and_resume_takes_the_edit() -> None:
    lines = entries(transcript("edit-branch"))
    users = {text_of(d): d for d in lines if d["type"] == "user"}
    assert set(users) == {"one", "two", "edit two"}
    reply_one = next(d for d in lines if d["type"] == "assistant" and text_of(d)[0].get("text") == "Reply to: one")
    assert users["edit two"]["parentUuid"] == reply_one["uuid"]
    forks = [u for u, n in _children(lines).items() if n > 1]
    assert len(forks) == 1  # one entry with two children: the two branches
    assert expected("edit-branch")["resumeContinuedParent"] == uuids(lines)[-1]


def test_the_hand_edited_copies_differ_from_edit_branch_only_as_described() -> None:
    source = transcript("edit-branch").read_text().splitlines()
    copies = {t: transcript(t).read_text().splitlines() for t in ("edit-branch-old-leaf", "edit-branch-no-last-prompt",
                                                                  "edit-branch-file-order")}
    changed = [i for i, (a, b) in enumerate(zip(source, copies["edit-branch-old-leaf"], strict=True)) if a != b]
    assert len(changed) == 1 and json.loads(source[changed[0]])["type"] == "last-prompt"
    without = [x for x in source if json.loads(x)["type"] != "last-prompt"]
    assert copies["edit-branch-no-last-prompt"] == without
    assert sorted(copies["edit-branch-file-order"]) == sorted(without) != copies["edit-branch-file-order"]
    # The three clauses: last-prompt wins over file order; else file order, not timestamps.
    old_leaf, plain, order = (expected(t) for t in copies)
    assert old_leaf["resumeContinuedParent"] != expected("edit-branch")["resumeContinuedParent"]
    assert plain["leafRule"] == order["leafRule"] == "last-uuid-entry"
    assert order["resumeContinuedParent"] == old_leaf["resumeContinuedParent"]
    moved = {d["uuid"]: d["timestamp"] for d in entries(transcript("edit-branch-file-order")) if "uuid" in d}
    assert moved[order["resumeContinuedParent"]] < max(moved.values())  # not the latest timestamp


def test_image_holds_the_image_block_and_the_meta_entry_naming_its_stored_copy() -> None:
    lines = entries(transcript("image"))
    user = next(d for d in lines if d["type"] == "user" and not d.get("isMeta"))
    assert [b["type"] for b in text_of(user)] == ["text", "image"]
    meta = next(d for d in lines if d.get("isMeta"))
    assert text_of(meta)[0]["text"].startswith("[Image: source: /tmp/mosaic-claude-fixtures/trees/image/tmp/")


def test_entry_types_json_is_what_the_trees_hold() -> None:
    paths = sorted(p for p in TREES.rglob("*.jsonl"))
    committed = json.loads((FIXTURES / "entry-types.json").read_text())
    assert committed == json.loads(json.dumps(entry_types(paths)))
    assert set(committed) == {"user", "assistant", "attachment", "queue-operation", "last-prompt", "atis-latch",
                              "cost-state", "mode"}


def test_the_rule_takes_the_last_last_prompt_then_the_last_uuid_line_and_never_a_timestamp() -> None:
    a = {"type": "user", "uuid": "a", "timestamp": "2030-01-01T00:00:00Z"}
    b = {"type": "assistant", "uuid": "b", "timestamp": "2020-01-01T00:00:00Z"}
    prompts = [{"type": "last-prompt", "leafUuid": "a"}, {"type": "last-prompt", "leafUuid": "b"}]
    assert leaf_by_rule([a, prompts[1], b, prompts[0]]) == ("last-prompt", "a")
    assert leaf_by_rule([a, b, {"type": "cost-state"}]) == ("last-uuid-entry", "b")
    with pytest.raises(ValueError):
        leaf_by_rule([{"type": "mode"}])
