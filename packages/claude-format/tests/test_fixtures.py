"""The transcript trees the pinned binary made (fixtures/claude-2.1.283/trees, fixtures/README.md "Claude Code
2.1.283"): every transcript parses at the pinned version inside its project, and the default leaf the parser
picks is the entry `--resume` continued on the binary (`expected.json`'s `resumeContinuedParent`, with the
clause of the rule that picks it, `leafRule`): B1 part 4 and L1 on the binary's own evidence, the three
hand-edited copies of edit-branch included (a last-prompt naming the older branch, none, the older branch
last in the file). Fails, never skips, when the trees are missing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import ok

from mosaic.claude_format import TranscriptRefusal, parse
from mosaic.claude_format.model import ImageBlock

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
TREES = REPO / "fixtures" / "claude-2.1.283" / "trees"
NAMES = ["edit-branch", "edit-branch-file-order", "edit-branch-no-last-prompt", "edit-branch-old-leaf", "fork",
         "image", "linear"]


def expected(tree: str) -> dict[str, Any]:
    got: dict[str, Any] = json.loads((TREES / tree / "expected.json").read_text())
    return got


def transcript(tree: str, session: str) -> bytes:
    e = expected(tree)
    return (TREES / tree / "claude" / "projects" / e["slug"] / f"{session}.jsonl").read_bytes()


def test_the_trees_are_all_there() -> None:
    assert sorted(p.name for p in TREES.iterdir()) == NAMES


@pytest.mark.parametrize("tree", NAMES)
def test_L1_the_default_leaf_is_the_entry_resume_continued_on_the_binary(tree: str) -> None:
    e = expected(tree)
    p = ok(parse(transcript(tree, e["sessionId"]), project=e["cwd"]))
    assert p.default_leaf == f"n.{e['resumeContinuedParent']}"
    assert p.leaf_rule == e["leafRule"]
    assert p.version == "2.1.283" and p.cwd == e["cwd"] and not p.notices and not p.unreadable_lines


@pytest.mark.parametrize("tree", NAMES)
def test_every_transcript_of_every_tree_parses_inside_its_project(tree: str) -> None:
    e = expected(tree)
    for path in sorted((TREES / tree / "claude" / "projects").rglob("*.jsonl")):
        p = ok(parse(path.read_bytes(), project=e["cwd"]))
        assert p.version == "2.1.283", path
        assert isinstance(parse(path.read_bytes(), project="/somewhere/else"), TranscriptRefusal)


def test_L1_an_edit_branch_keeps_both_branches_readable() -> None:
    e = expected("edit-branch")
    p = ok(parse(transcript("edit-branch", e["sessionId"]), project=e["cwd"]))
    assert len(p.branches) == 2 and p.default_branch != "main"
    users = {name: [i.blocks[0].text for i in b.items if i.kind == "user"]  # type: ignore[union-attr]
             for name, b in p.branches.items()}
    assert users["main"] == ["one", "two"] and users[p.default_branch] == ["one", "edit two"]


def test_L2_the_trees_from_another_version_refuse_unsupported_harness() -> None:
    e = expected("linear")
    data = transcript("linear", e["sessionId"]).replace(b'"version":"2.1.283"', b'"version":"2.1.284"')
    refused = parse(data, project=e["cwd"])
    assert isinstance(refused, TranscriptRefusal) and refused.code == "unsupported-harness"


def test_L5_the_linear_trees_subagent_reads_apart_and_its_main_file_holds_none_of_it() -> None:
    e = expected("linear")
    main = ok(parse(transcript("linear", e["sessionId"]), project=e["cwd"]))
    subs = sorted((TREES / "linear" / "claude" / "projects" / e["slug"] / e["sessionId"] / "subagents").glob("*.jsonl"))
    assert len(subs) == 1
    sub = ok(parse(subs[0].read_bytes(), project=e["cwd"]))
    sub_ids = set(sub.branches["main"].entry_ids)
    assert sub.branches["main"].sidechain and sub_ids
    assert not sub_ids & {x for b in main.branches.values() for x in b.entry_ids}
    assert not any(i.attrs.get("sidechain") for i in main.branches["main"].items)
    kinds = [i.kind for i in main.branches["main"].items]
    assert "toolResult" in kinds and kinds.count("user") >= 3


def test_the_image_trees_image_block_is_a_placeholder_with_its_media_type() -> None:
    e = expected("image")
    p = ok(parse(transcript("image", e["sessionId"]), project=e["cwd"]))
    first = p.branches["main"].items[0]
    assert first.kind == "user" and ImageBlock("image/png") in first.blocks
    assert b"iVBOR" in transcript("image", e["sessionId"])  # the PNG's base64 is in the line ...
    assert "iVBOR" not in json.dumps([i.to_json() for i in p.branches["main"].items])  # ... never in an item


def test_the_binarys_own_meta_note_is_shown_marked_as_meta() -> None:
    """The image tree holds an `isMeta` user entry, the `[Image: source: <path>]` note the binary added for
    the model beside the user's image: shown in place (nothing the model saw is hidden), marked `isMeta`."""
    e = expected("image")
    items = ok(parse(transcript("image", e["sessionId"]), project=e["cwd"])).branches["main"].items
    meta = [i for i in items if i.attrs.get("isMeta")]
    assert len(meta) == 1 and meta[0].kind == "user"
    assert meta[0].blocks[0].text.startswith("[Image: source: ")  # type: ignore[union-attr]
    assert not any(i.attrs.get("isMeta") for i in items if i is not meta[0])
