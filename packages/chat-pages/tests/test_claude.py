"""L1 to L6 (brief §8, issue 30): Claude Code seats in the catalogue and the history, through the same
reader, routes, schema and CLI as Pi conversations.

The trees are the pinned binary's own (fixtures/claude-2.1.283/trees: a project root with its launcher
receipts, and the Claude config directory the binary wrote), copied into the test directory with the
transcripts' cwd moved to the copy's real path (`helpers.claude_tree`). Every reader call here runs inside
the fingerprint and the inotify watch of helpers.World (F17): a call may open a Claude seat's receipts, the
directories down to its transcripts, and the transcripts its receipts name (the catalogue) or the one the
conversation names (open, next); any other open fails the call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ClaudeTree, World, assemble, claude_tree, fingerprint, materialise, write_receipt

from mosaic.chat_pages import ReaderServer
from mosaic.chat_pages.parts import MAX_PARTS_PER_PAGE, MAX_STRING_UNITS

TREES = ["edit-branch", "edit-branch-file-order", "edit-branch-no-last-prompt", "edit-branch-old-leaf", "fork",
         "image", "linear"]


def _seat(world: World, tree: str = "edit-branch", *, name: str | None = None) -> ClaudeTree:
    t = claude_tree(world.top, tree, name=name)
    world.approve_claude(t.project, t.claude, seat=t.expected["seat"])
    return t


def _texts(parts: list[dict[str, Any]]) -> list[str]:
    return [b.get("text") for i in assemble(parts) if i["kind"] != "notice" for b in i["blocks"][:1]]


def _refusal(res: dict[str, Any]) -> tuple[str, bool]:
    assert res["ok"] is False, res
    return res["refusal"]["code"], res["refusal"]["reconcile"]


def _append(path: Path, *objs: dict[str, Any]) -> None:
    with path.open("ab") as f:
        for obj in objs:
            f.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")


def _entry_like(path: Path, kind: str, **fields: Any) -> dict[str, Any]:
    """A real entry of `kind` from the transcript, with `fields` replaced."""
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        if obj.get("type") == kind:
            return {**obj, **fields}
    raise LookupError(kind)


# -- L1: the default leaf shown, other branches readable -------------------------------------------------


@pytest.mark.parametrize("tree", TREES)
def test_L1_open_shows_the_branch_of_the_leaf_resume_continued_on_the_binary(world: World, tree: str) -> None:
    t = _seat(world, tree)
    rows = {r["sessionId"]: r for r in world.catalogue()["conversations"]}
    row = rows[t.session]
    cid = world.claude_cid(t.project, t.session)
    assert row["id"] == cid and cid.startswith("claude-")
    assert row["harness"] == "claude-code" and row["refusal"] is None and row["file"] == f"{t.session}.jsonl"
    view = world.open(cid)["view"]
    default = next(b for b in view["branches"] if b["name"] == view["defaultBranch"])
    assert default["leaf"] == f"n.{t.expected['resumeContinuedParent']}"
    for b in view["branches"]:  # every other branch opens by name
        parts, last = world.read_all(cid, b["name"])
        assert last["page"]["branch"] == b["name"] and len(assemble(parts)) == b["items"]


def test_L1_the_edit_branch_is_the_default_and_the_older_branch_opens_by_name(world: World) -> None:
    t = _seat(world)
    cid = world.claude_cid(t.project, t.session)
    first = world.open(cid)
    names = [b["name"] for b in first["view"]["branches"]]
    assert len(names) == 2 and first["view"]["defaultBranch"] == names[1] != "main"
    edit, _ = world.read_all(cid)
    older, _ = world.read_all(cid, "main")
    assert [x for x in _texts(edit) if not x.startswith("Reply")] == ["one", "edit two"]
    assert [x for x in _texts(older) if not x.startswith("Reply")] == ["one", "two"]
    assert _refusal(world.open(cid, "b.nope")) == ("unknown-branch", True)
    # Attachments (the system prompt among them) are never parts of a page.
    assert "You are an interactive agent" not in json.dumps(edit + older)


def test_L1_cursors_byte_caps_continuation_parts_and_follow(world: World) -> None:
    """A long transcript pages 100 parts at a time; a string past 262,144 units continues in fragments; a
    follow returns only what was appended, on the cursor's branch, and says where the leaf moved."""
    t = _seat(world)
    path = t.transcript()
    cid = world.claude_cid(t.project, t.session)
    default = world.open(cid)["view"]
    leaf = next(b["leaf"] for b in default["branches"] if b["name"] == default["defaultBranch"])[2:]
    parent = leaf
    user = _entry_like(path, "user")
    turns = []
    for n in range(120):
        turns.append({**user, "uuid": f"00000000-0000-4000-8000-{n:012d}", "parentUuid": parent,
                      "message": {"role": "user", "content": f"turn {n}"}})
        parent = turns[-1]["uuid"]
    reply = _entry_like(path, "assistant")
    big = {**reply, "uuid": "00000000-0000-4000-8000-999999999999", "parentUuid": parent,
           "message": {**reply["message"], "content": [{"type": "text", "text": "x" * (MAX_STRING_UNITS + 10)}]}}
    _append(path, *turns, big)
    first = world.open(cid)
    assert first["ok"], first
    assert len(first["page"]["parts"]) == MAX_PARTS_PER_PAGE and first["cursor"] is not None
    parts, last = world.read_all(cid)
    assert assemble(parts)[-1]["blocks"][0]["text"] == "x" * (MAX_STRING_UNITS + 10)
    assert any(b["kind"] == "fragment" for p in parts for b in p["blocks"])
    assert world.follow(last)["page"]["parts"] == []
    last = world.open(cid)
    while last["cursor"] is not None:
        last = world.next(last["cursor"]["id"], cid, last["page"]["branch"])
    _append(path, {**user, "uuid": "00000000-0000-4000-8000-777777777777", "parentUuid": big["uuid"],
                   "message": {"role": "user", "content": "appended"}})
    grown = world.follow(last)
    assert _texts(grown["page"]["parts"]) == ["appended"]
    assert grown["page"]["branch"] == default["defaultBranch"]
    main_leaf = next(b["leaf"] for b in default["branches"] if b["name"] == "main")[2:]
    elsewhere = {**user, "uuid": "00000000-0000-4000-8000-888888888888", "parentUuid": main_leaf,
                 "message": {"role": "user", "content": "old"}}
    _append(path, elsewhere, {"type": "last-prompt", "lastPrompt": "old", "leafUuid": elsewhere["uuid"],
                              "sessionId": t.session})
    again = world.follow(grown)
    assert again["page"]["parts"] == [] and again["view"]["defaultBranch"] == "main"


def test_L1_the_harness_is_named_in_the_catalogue_beside_pi_rows_and_routes_serve_it(
        world: World, server: ReaderServer) -> None:
    pi = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    world.approve(pi)
    t = _seat(world, "linear")
    status, body = world.http(server.url, "/conversations", token=server.token)
    assert status == 200
    assert sorted((r["harness"], r["file"]) for r in body["conversations"]) == [
        ("claude-code", f"{t.session}.jsonl"), ("pi", "plain.jsonl")]
    cid = world.claude_cid(t.project, t.session)
    status, page = world.http(server.url, f"/conversations/{cid}?branch=main", cid, token=server.token)
    assert status == 200 and page["page"]["branch"] == "main" and page["page"]["conversation"] == cid


# -- L2: another version ---------------------------------------------------------------------------------


def test_L2_a_transcript_from_another_version_is_unsupported_harness_in_the_catalogue_and_on_open(world: World) -> None:
    t = _seat(world, "fork")
    older = t.transcript()
    older.write_bytes(older.read_bytes().replace(b'"version":"2.1.283"', b'"version":"2.1.300"'))
    source = next(p for p in t.slug_dir.glob("*.jsonl") if p != older)  # launches 1 and 2 name the source
    lines = source.read_bytes().splitlines(keepends=True)
    at = max(i for i, x in enumerate(lines) if b'"uuid"' in x)
    lines[at] = lines[at].replace(b'"version":"2.1.283"', b'"version":"2.1.284"')
    source.write_bytes(b"".join(lines))  # the first entry 2.1.283, a later one 2.1.284
    rows = {r["sessionId"]: r for r in world.catalogue()["conversations"]}
    assert rows[t.session]["refusal"]["code"] == "unsupported-harness"  # the catalogue reads the head
    assert rows[source.stem]["refusal"] is None  # its head is 2.1.283 ...
    assert _refusal(world.open(rows[t.session]["id"])) == ("unsupported-harness", False)
    assert _refusal(world.open(rows[source.stem]["id"])) == ("unsupported-harness", False)  # ... the whole is not


def test_L2_a_follow_refuses_appended_entries_of_another_version(world: World) -> None:
    t = _seat(world, "linear")
    cid = world.claude_cid(t.project, t.session)
    _, last = world.read_all(cid)
    _append(t.transcript(), _entry_like(t.transcript(), "assistant", uuid="00000000-0000-4000-8000-000000000042",
                                        version="2.1.300"))
    assert _refusal(world.follow(last)) == ("unsupported-harness", False)


# -- L3: a decoy never listed, never opened --------------------------------------------------------------


def test_L3_a_decoy_session_file_named_in_no_receipt_is_never_listed_never_opened(world: World) -> None:
    t = _seat(world, "linear")
    (decoy_id,) = t.expected["decoys"]
    decoy = t.transcript(decoy_id)
    assert decoy.is_file()  # the binary's own second session, in the same project directory
    rows = world.catalogue()["conversations"]
    assert [r["sessionId"] for r in rows] == [t.session]  # only what the receipts name
    cid = rows[0]["id"]
    for b in world.open(cid)["view"]["branches"]:
        _, last = world.read_all(cid, b["name"])
        world.follow(last)
    # Its would-be ids are unknown: the reader never names it.
    assert _refusal(world.open(world.claude_cid(t.project, decoy_id))) == ("unknown-conversation", True)
    assert _refusal(world.open(world.cid(t.project, decoy.name))) == ("unknown-conversation", True)
    opened = set().union(*world.opened_log)
    assert str(decoy) not in opened and not any(decoy_id in p for p in opened)


# -- L4: outside the root, a symlink, another project ----------------------------------------------------


@pytest.mark.parametrize("line", ["../../outside/x", "/etc/passwd", "ff152d22-ac45-42dd-b8bb-2694974c365a/../../x",
                                  "notes.txt", "FF152D22-AC45-42DD-B8BB-2694974C365A",
                                  "ff152d22-ac45-42dd-b8bb-2694974c365a.jsonl"])
def test_L4_a_receipt_line_that_is_not_a_session_id_is_refused_and_nothing_is_opened(world: World, line: str) -> None:
    t = _seat(world, "linear")
    for receipt in t.project.rglob("session-id"):
        receipt.write_text(line + "\n")
    outside = world.top / "outside"
    outside.mkdir()
    (outside / "x.jsonl").write_bytes(t.transcript().read_bytes())
    rows = world.catalogue()["conversations"]
    assert len(rows) == 1 and rows[0]["refusal"]["code"] == "unsafe-path" and rows[0]["sessionId"] is None
    assert _refusal(world.open(rows[0]["id"])) == ("unsafe-path", False)
    assert not any(p.endswith(".jsonl") for p in set().union(*world.opened_log))


def test_L4_a_symlinked_transcript_is_unsafe_path_and_its_target_never_opened(world: World) -> None:
    t = _seat(world, "linear")
    target = world.top / "elsewhere.jsonl"
    t.transcript().rename(target)
    t.transcript().symlink_to(target)
    cid = world.claude_cid(t.project, t.session)
    assert world.catalogue()["conversations"][0]["refusal"]["code"] == "unsafe-path"
    assert _refusal(world.open(cid)) == ("unsafe-path", False)
    assert str(target) not in set().union(*world.opened_log)


def test_L4_a_project_directory_that_is_a_symlink_out_of_the_root_is_never_looked_into(world: World) -> None:
    t = _seat(world, "linear")
    outside = world.top / "outside-projects"
    t.slug_dir.rename(outside)
    t.slug_dir.symlink_to(outside)
    row = world.catalogue()["conversations"][0]
    assert row["refusal"]["code"] == "unsafe-path" and "symlink" in row["refusal"]["message"]
    assert _refusal(world.open(row["id"])) == ("unsafe-path", False)
    assert not any(p.startswith(str(outside)) for p in set().union(*world.opened_log))


def test_L4_another_projects_session_is_foreign_project(world: World) -> None:
    """The receipt names a session the binary ran in another project: its transcript is found (in that
    project's directory under the same Claude root) and refused by its first entry's cwd, as F9 refuses a
    Pi header's."""
    mine = _seat(world, "image")
    other = claude_tree(world.top, "linear")  # another project's tree, its transcripts under mine's root
    os.rename(other.slug_dir, mine.claude / "projects" / other.expected["slug"])
    write_receipt(mine.project, "alpha", other.session, launch="9")
    rows = {r["sessionId"]: r for r in world.catalogue()["conversations"]}
    assert rows[mine.session]["refusal"] is None
    assert rows[other.session]["refusal"]["code"] == "foreign-project"
    assert _refusal(world.open(rows[other.session]["id"])) == ("foreign-project", False)


def test_L4_one_session_in_two_project_directories_or_in_none_is_refused(world: World) -> None:
    t = _seat(world, "linear")
    copy = t.claude / "projects" / "-another-copy"
    copy.mkdir()
    (copy / f"{t.session}.jsonl").write_bytes(b"")
    missing = "00000000-0000-4000-8000-00000000abcd"
    write_receipt(t.project, "alpha", missing, launch="9")
    rows = {r["sessionId"]: r for r in world.catalogue()["conversations"]}
    assert rows[t.session]["refusal"]["code"] == "unsafe-path"
    assert "2 project directories" in rows[t.session]["refusal"]["message"]
    assert rows[missing]["refusal"]["code"] == "unavailable"  # named, not written (yet)
    assert _refusal(world.open(rows[missing]["id"])) == ("unavailable", False)


def test_L4_a_receipt_that_is_a_symlink_or_not_a_file_is_refused_never_followed(world: World) -> None:
    t = _seat(world, "image")
    receipt = t.project / ".pi/state/alpha/session-id"
    receipt.unlink()
    elsewhere = world.top / "other-receipt"
    elsewhere.write_text(f"{t.session}\n")
    receipt.symlink_to(elsewhere)
    launch = t.project / ".pi/state/alpha/launches/1/session-id"
    launch.unlink()
    launch.mkdir()
    cat = world.catalogue()
    assert cat["conversations"] == []
    assert sorted(r["refusal"]["code"] for r in cat["refusedRoots"]) == ["unsafe-path", "unsafe-path"]
    assert str(elsewhere) not in set().union(*world.opened_log)


def test_a_claude_seat_needs_an_explicit_claude_root_and_nothing_defaults(world: World) -> None:
    t = claude_tree(world.top, "linear")
    world.approve_claude(t.project, None)
    world.approve_claude(t.project, "relative/claude", seat="other")
    cat = world.catalogue()
    assert cat["conversations"] == []
    assert [(r["seat"], r["refusal"]["code"]) for r in cat["refusedRoots"]] == [("alpha", "unsafe-path"),
                                                                              ("other", "unsafe-path")]


def test_launch_receipts_add_sessions_in_order_each_once(world: World) -> None:
    t = _seat(world, "fork")
    rows = world.catalogue()["conversations"]
    launches = t.expected["launches"]
    in_order = list(dict.fromkeys([t.session, *launches]))  # the seat's receipt, then launches 1, 2, 3
    assert [r["sessionId"] for r in rows] == in_order and len(rows) == 2
    assert all(r["refusal"] is None for r in rows)
    write_receipt(t.project, "alpha", launches[0], launch="10")  # 10 after 3, once
    assert [r["sessionId"] for r in world.catalogue()["conversations"]] == in_order


def test_L6_a_next_reads_only_the_receipt_that_named_its_session(world: World) -> None:
    """A Claude next reads the receipt that named its session again, alone, so a page costs the same beside 1
    launch or 1,000 (every receipt was read at every page). Where that receipt no longer names the session,
    every receipt is read and decides, as before: another receipt naming it serves the page, none is
    unknown-conversation. (The receipts each call opened: the F17 watch's log.)"""
    t = _seat(world)
    path = t.transcript()
    cid = world.claude_cid(t.project, t.session)
    user = _entry_like(path, "user")
    parent = next(b["leaf"] for b in world.open(cid)["view"]["branches"] if b["name"] == "main")[2:]
    turns = []
    for n in range(450):
        turns.append({**user, "uuid": f"00000000-0000-4000-8000-{n:012d}", "parentUuid": parent,
                      "message": {"role": "user", "content": f"turn {n}"}})
        parent = turns[-1]["uuid"]
    _append(path, *turns)
    for n in range(40):
        write_receipt(t.project, "alpha", f"00000000-0000-4000-8000-{n + 1:012x}", launch=str(n + 100))
    seat = str(t.project / ".pi/state/alpha/session-id")

    def receipts() -> set[str]:
        return {p for p in world.opened_log[-1] if p.endswith("/session-id")}

    res = world.open(cid, "main")
    assert res["ok"] and len(receipts()) == 44, "an open finds the session by reading every receipt"
    texts = _texts(res["page"]["parts"])
    res = world.next(res["cursor"]["id"], cid, "main")
    assert res["ok"] and receipts() == {seat}
    texts += _texts(res["page"]["parts"])
    # The seat's receipt no longer names it; the launches' do (the tree's three, and a seventh): every receipt
    # is read, and the page is served.
    write_receipt(t.project, "alpha", "00000000-0000-4000-8000-00000000ffff")
    write_receipt(t.project, "alpha", t.session, launch="7")
    res = world.next(res["cursor"]["id"], cid, "main")
    assert res["ok"] and len(receipts()) == 45
    texts += _texts(res["page"]["parts"])
    later = 0
    while res["cursor"] is not None:
        res = world.next(res["cursor"]["id"], cid, "main")
        texts += _texts(res["page"]["parts"])
        assert receipts() == {str(t.project / ".pi/state/alpha/launches/1/session-id")}  # the first naming it now
        later += 1
    assert later >= 2 and texts[-450:] == [f"turn {n}" for n in range(450)]
    more = [{**user, "uuid": f"00000000-0000-4000-9000-{n:012d}", "parentUuid": parent,
             "message": {"role": "user", "content": f"more {n}"}} for n in range(150)]
    for prev, e in zip([parent] + [m["uuid"] for m in more], more, strict=False):
        e["parentUuid"] = prev
    _append(path, *more)
    res = world.follow(res)  # the follow's page cursor reads the same receipt alone too
    assert res["ok"] and res["cursor"] is not None
    res = world.next(res["cursor"]["id"], cid, "main")
    assert receipts() == {str(t.project / ".pi/state/alpha/launches/1/session-id")}
    assert _texts(res["page"]["parts"])[-1] == "more 149" and res["cursor"] is None
    for launch in ("1", "2", "3", "7"):  # no receipt names it now
        (t.project / f".pi/state/alpha/launches/{launch}/session-id").unlink()
    assert _refusal(world.follow(res))[0] == "unknown-conversation"
    assert len(receipts()) == 41


# -- L5: sidechains and subagents apart ------------------------------------------------------------------


def test_L5_subagent_transcripts_never_reach_the_main_conversation_and_are_never_opened(world: World) -> None:
    t = _seat(world, "linear")
    subs = sorted((t.slug_dir / t.session / "subagents").glob("*.jsonl"))
    assert len(subs) == 1
    sub_prompt = json.loads(subs[0].read_bytes().splitlines()[0])["message"]["content"]
    cid = world.claude_cid(t.project, t.session)
    parts, _ = world.read_all(cid)
    assert sub_prompt not in _texts(parts)  # the subagent's own prompt is in its file only
    assert not any(i["attrs"].get("sidechain") for i in assemble(parts))
    assert "toolResult" in [i["kind"] for i in assemble(parts)]
    assert [r["sessionId"] for r in world.catalogue()["conversations"]] == [t.session]
    assert str(subs[0]) not in set().union(*world.opened_log)


def test_L5_sidechain_entries_in_a_main_transcript_are_a_branch_of_their_own(world: World) -> None:
    t = _seat(world, "linear")
    sub = next((t.slug_dir / t.session / "subagents").glob("*.jsonl"))
    main = t.transcript()
    main.write_bytes(main.read_bytes() + sub.read_bytes())  # what older versions wrote into the main file
    cid = world.claude_cid(t.project, t.session)
    opened = world.open(cid)
    assert opened["view"]["defaultBranch"] == "main"
    first = json.loads(sub.read_bytes().splitlines()[0])
    sidechain = f"b.{first['uuid']}"
    assert [b["name"] for b in opened["view"]["branches"]] == ["main", sidechain]
    parts, _ = world.read_all(cid, sidechain)
    assert _texts(parts)[0] == first["message"]["content"]
    assert all(i["attrs"]["sidechain"] is True for i in assemble(parts))
    main_parts, _ = world.read_all(cid)
    assert first["message"]["content"] not in _texts(main_parts)


# -- L6: no writes over the Claude directory -------------------------------------------------------------


def test_L6_every_call_over_claude_seats_writes_nothing_and_opens_only_what_receipts_name(world: World) -> None:
    """F17 over the Claude directory: every tree approved at once, then the catalogue, every branch of
    every conversation to its last page and a follow, each inside the fingerprint of the whole tree (the
    Claude config directories included) and the inotify watch; what no receipt names (the decoy, the
    subagent transcript, the config directory's own files) is never opened."""
    trees = [_seat(world, tree) for tree in TREES]
    for t in trees:
        (t.claude / ".claude.json").write_text('{"userID": "not read"}')
    before = fingerprint(world.top)
    rows = world.catalogue()["conversations"]
    assert len(rows) == len(TREES) + 1 and all(r["refusal"] is None for r in rows)  # the fork tree names two
    for row in rows:
        for b in world.open(row["id"])["view"]["branches"]:
            _, last = world.read_all(row["id"], b["name"])
            assert world.follow(last)["ok"]
    assert fingerprint(world.top) == before
    opened = set().union(*world.opened_log)
    named = {f"{s}.jsonl" for t in trees for s in [t.session, *t.expected["launches"]]}
    for t in trees:
        for path in t.claude.rglob("*"):
            if path.is_file() and path.name not in named:
                assert str(path) not in opened, path


# -- the command line ------------------------------------------------------------------------------------


def test_mosaic_read_names_a_claude_seat_with_claude_spec_and_reads_it(world: World, tmp_path: Path) -> None:
    t = _seat(world, "edit-branch")
    pi = materialise(world.top, "proj-rpc", ["plain.jsonl"])

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mosaic.chat_pages", *argv], capture_output=True, text=True,
                              timeout=120, check=False)

    specs = ["--spec", str(pi), "alpha", "--claude-spec", str(t.project), "alpha", str(t.claude)]
    listed = run(*specs, "--text", "catalogue")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    cid = world.claude_cid(t.project, t.session)
    assert any(x.startswith(cid) and x.endswith("ok  (claude-code)") for x in lines), lines
    assert any(x.startswith("pi-") and x.endswith("bytes  ok") for x in lines), lines
    opened = run("--text", "open", cid, "--branch", "main", *specs)
    assert opened.returncode == 0 and "[text] two" in opened.stdout and "branch main" in opened.stdout
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"specs": [{"projectRoot": str(t.project), "seat": "alpha",
                                             "harness": "claude-code", "claudeRoot": str(t.claude)}]}))
    via_config = run("--config", str(config), "catalogue")
    assert via_config.returncode == 0 and json.loads(via_config.stdout)["conversations"][0]["id"] == cid
