"""F15: follow. Verify the old prefix, take a fresh snapshot, return only the parts appended to this branch
(empty when the conversation continued on another branch), view.defaultBranch where Pi's leaf is now; a
vanished branch or changed earlier parts refuse source-replaced."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import World, entry, header, materialise, write_session


def _chain(world: World, n: int = 3) -> tuple[str, Path]:
    root = world.top / "proj"
    lines = [header(root)]
    parent = None
    for i in range(n):
        lines.append(entry(f"e{i}", parent, f"text {i}"))
        parent = f"e{i}"
    p = write_session(root, "s.jsonl", lines)
    world.approve(root)
    return world.cid(root, "s.jsonl"), p


def _append(p: Path, *lines: bytes) -> None:
    with open(p, "ab") as f:
        f.write(b"".join(lines))


def test_F15_last_page_carries_a_follow_instead_of_a_cursor(world: World) -> None:
    cid, p = _chain(world)
    res = world.open(cid)
    assert res["cursor"] is None and res["page"]["nextCursor"] is None
    assert res["follow"]["kind"] == "follow" and res["follow"]["branch"] == "main"


def test_F15_follow_returns_only_parts_appended_to_this_branch(world: World) -> None:
    cid, p = _chain(world)
    res = world.open(cid)
    quiet = world.follow(res)
    assert quiet["ok"] and quiet["page"]["parts"] == [] and quiet["follow"] is not None
    _append(p, entry("e3", "e2", "new one"), entry("e4", "e3", "new two"), b'{"partial')
    out = world.follow(quiet)
    assert [x["item"] for x in out["page"]["parts"]] == ["n.e3", "n.e4"]
    assert out["view"]["incomplete"] is True and out["page"]["branch"] == "main"
    assert out["page"]["sourceEpoch"] == res["page"]["sourceEpoch"]
    # The partial line completes: it is a malformed line, a notice on every branch after the leaf.
    _append(p, b'}\n')
    out2 = world.follow(out)
    assert [x["item"] for x in out2["page"]["parts"]] == ["x.line-7"]


def test_F15_continued_on_another_branch_returns_nothing_and_default_branch_moves(world: World) -> None:
    cid, p = _chain(world)
    res = world.open(cid)
    assert res["view"]["defaultBranch"] == "main"
    _append(p, entry("f1", "e1", "a fork from e1"), entry("f2", "f1", "on the fork"))
    out = world.follow(res)
    assert out["ok"] and out["page"]["parts"] == [] and out["page"]["branch"] == "main"
    assert out["view"]["defaultBranch"] == "b.f1"
    fork = world.open(cid, out["view"]["defaultBranch"])
    assert [x["item"] for x in fork["page"]["parts"]][-2:] == ["n.f1", "n.f2"]


def test_F15_a_follow_that_finds_more_than_one_page_hands_out_a_cursor(world: World) -> None:
    cid, p = _chain(world)
    res = world.open(cid)
    parent = "e2"
    lines = []
    for i in range(150):
        lines.append(entry(f"g{i}", parent, f"g {i}"))
        parent = f"g{i}"
    _append(p, *lines)
    out = world.follow(res)
    assert len(out["page"]["parts"]) == 100 and out["cursor"] is not None
    rest = world.next(out["cursor"]["id"], cid, "main")
    assert len(rest["page"]["parts"]) == 50 and rest["follow"] is not None
    assert [x["item"] for x in out["page"]["parts"] + rest["page"]["parts"]] == [f"n.g{i}" for i in range(150)]


def test_F15_a_duplicate_id_that_replaces_an_earlier_entry_is_source_replaced(world: World) -> None:
    cid, p = _chain(world)
    res = world.open(cid)
    _append(p, entry("e1", "e0", "the same id, other text"))
    out = world.follow(res)
    assert out.get("ok") is False, out  # refused, not a page
    assert out["refusal"] == {"code": "source-replaced", "reconcile": True, "message": out["refusal"]["message"]}


def test_F15_a_missing_parent_that_turns_up_later_is_source_replaced(world: World) -> None:
    root = world.top / "proj"
    p = write_session(root, "s.jsonl", [header(root), entry("e0", None, "root"), entry("o1", "lost", "orphan")])
    world.approve(root)
    cid = world.cid(root, "s.jsonl")
    res = world.open(cid, "b.o1")
    assert [x["item"] for x in res["page"]["parts"]] == ["x.gap-o1", "n.o1"]
    _append(p, entry("lost", "e0", "the parent, late"))
    assert world.follow(res)["refusal"]["code"] == "source-replaced"


def test_F15_fixture_duplicate_id_recording_refuses_follow_from_its_prefix(world: World) -> None:
    root = materialise(world.top, "proj-adv", ["duplicate-id.jsonl"])
    world.approve(root)
    p = root / ".pi/state/alpha/sessions/duplicate-id.jsonl"
    full = p.read_bytes()
    # Replay the recording as a growing file: the prefix before the duplicate line, then the rest.
    lines = full.split(b"\n")
    dup_line = next(i for i, raw in enumerate(lines[1:], 1)
                    if raw and json.loads(raw)["id"] in {json.loads(x)["id"] for x in lines[1:i] if x})
    p.write_bytes(b"\n".join(lines[:dup_line]) + b"\n")
    cid = world.cid(root, "duplicate-id.jsonl")
    res = world.open(cid)
    _append(p, b"\n".join(lines[dup_line:]))
    assert world.follow(res)["refusal"]["code"] == "source-replaced"


def test_F15_a_vanished_branch_is_source_replaced(world: World) -> None:
    cid, p = _chain(world)
    _append(p, entry("f1", "e1", "fork"))
    res = world.open(cid, "b.f1")
    assert res["ok"]
    # The prefix stays byte for byte; a later line reuses e2's id under f1, so e1's only child is now f1,
    # which continues main: branch b.f1 no longer exists in the fresh snapshot.
    _append(p, entry("e2", "f1", "e2 again, under the fork"))
    out = world.follow(res)
    assert out["refusal"]["code"] == "source-replaced" and "gone" in out["refusal"]["message"]


def test_F15_follow_on_a_branch_whose_earlier_items_stay_put_while_a_sibling_grows(world: World) -> None:
    cid, p = _chain(world)
    _append(p, entry("f1", "e1", "fork"))
    res = world.open(cid, "main")
    _append(p, entry("f2", "f1", "fork grows"), entry("e3", "e2", "main grows"))
    out = world.follow(res)
    assert [x["item"] for x in out["page"]["parts"]] == ["n.e3"] and out["view"]["defaultBranch"] == "main"


def test_F15_a_rebuilt_snapshot_never_serves_parts_kept_for_the_old_tree(world: World) -> None:
    """The parts of rendered items are kept by pi-format ref, which names the same item only in a
    snapshot continued in place. Here the appended lines repeat an id, so pi-format builds the tree again
    and the ref of the appended entry on main is the one the old tree's last entry had: the follow must
    render it, never serve the parts kept for the old entry."""
    root = world.top / "proj"
    p = write_session(root, "s.jsonl", [header(root), entry("a", None, "root"), entry("b", "a", "on main"),
                                        entry("d", "a", "the fork"), entry("e", "d", "on the fork")])
    world.approve(root)
    cid = world.cid(root, "s.jsonl")
    main = world.open(cid, "main")
    fork = world.open(cid, "b.d")  # renders (and keeps the parts of) d and e
    assert [x["item"] for x in fork["page"]["parts"]] == ["n.a", "n.d", "n.e"]
    _append(p, entry("f", "b", "appended to main"), entry("d", "a", "the fork again"))
    out = world.follow(main)
    assert out["ok"], out
    assert [(x["item"], x["blocks"][0]["text"]) for x in out["page"]["parts"]] == [("n.f", "appended to main")]
