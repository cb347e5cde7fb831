"""L1 to L6 (brief §8, issue 30): Claude Code seats in the catalogue and the history, through the same
reader, routes, schema and CLI as Pi conversations.

Every reader call here runs inside the fingerprint and the inotify watch of helpers.World (F17): a call may
open a Claude seat's receipts, the directories down to its transcripts, and the transcripts its receipts
name (the catalogue) or the one the conversation names (open, next); any other open fails the call. The
transcripts are the pinned binary's own (claude-format's test data), with their redacted cwd set to the
test project's real path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CLAUDE_DATA,
    World,
    assemble,
    claude_transcript,
    fingerprint,
    materialise,
    write_claude,
    write_receipt,
)

from mosaic.chat_pages import ReaderServer
from mosaic.chat_pages.parts import MAX_PARTS_PER_PAGE, MAX_STRING_UNITS

BRANCHY = "transcript-branch-resume-session-at.jsonl"
AGENT = "transcript-agent-and-bash.jsonl"
#: The session ids the recordings carry (their file names on the binary).
BRANCHY_ID = "11111111-2222-4333-8444-555555555555"
AGENT_ID = "ed43c1c3-c864-4ef7-9254-11227e7bd5e7"
DECOY_ID = "dec0dec0-0000-4000-8000-000000000001"
EDIT = "b.a95e6e6d-b1e7-4b14-80c7-bc48c9655fd3"


def _seat(world: World, *, name: str = "proj", sessions: dict[str, str] | None = None,
          receipt: tuple[str, ...] | None = None) -> tuple[Path, Path]:
    """A project with a Claude seat `claude`: its config dir beside it, each recording of `sessions`
    (session id -> recording) as a transcript, the receipt naming `receipt` (default: every session)."""
    project = world.top / name
    project.mkdir()
    claude = world.top / f"{name}-claude"
    sessions = {BRANCHY_ID: BRANCHY} if sessions is None else sessions
    for sid, recording in sessions.items():
        write_claude(claude, project, sid, claude_transcript(recording, os.path.realpath(project)))
    write_receipt(project, "claude", *(receipt if receipt is not None else tuple(sessions)))
    world.approve_claude(project, claude)
    return project, claude


def _texts(parts: list[dict[str, Any]]) -> list[str]:
    return [b.get("text") for i in assemble(parts) if i["kind"] != "notice" for b in i["blocks"][:1]]


def _refusal(res: dict[str, Any]) -> tuple[str, bool]:
    assert res["ok"] is False, res
    return res["refusal"]["code"], res["refusal"]["reconcile"]


# -- L1: the default leaf shown, other branches readable -------------------------------------------------


def test_L1_the_default_leaf_is_shown_and_the_older_branch_opens_by_name(world: World) -> None:
    project, _ = _seat(world)
    rows = world.catalogue()["conversations"]
    assert [(r["kind"], r["harness"], r["file"], r["sessionId"], r["refusal"]) for r in rows] == [
        ("conversation", "claude-code", f"{BRANCHY_ID}.jsonl", BRANCHY_ID, None)]
    cid = rows[0]["id"]
    assert cid == world.claude_cid(project, BRANCHY_ID) and cid.startswith("claude-")
    assert rows[0]["createdAt"] == "2026-12-06T12:07:30.723Z"
    first = world.open(cid)
    view = first["view"]
    assert view["defaultBranch"] == EDIT  # the leaf --resume continued on the binary (claude-format's L1)
    assert [(b["name"], b["items"]) for b in view["branches"]] == [("main", 6), (EDIT, 6)]
    parts, _ = world.read_all(cid)
    assert _texts(parts) == ["one", "Reply 2 to: one", "edit two", "Reply 6 to: edit two", "after branch T",
                             "Reply 7 to: after branch T"]
    older, _ = world.read_all(cid, "main")
    assert _texts(older) == ["one", "Reply 2 to: one", "two", "Reply 3 to: two", "three", "Reply 4 to: three"]
    assert _refusal(world.open(cid, "b.nope")) == ("unknown-branch", True)
    # Attachments (the system prompt among them) are never parts of a page.
    assert "You are an interactive agent" not in json.dumps(parts + older)


def test_L1_cursors_byte_caps_continuation_parts_and_follow(world: World) -> None:
    """A long transcript pages 100 parts at a time; a string past 262,144 units continues in fragments; a
    follow returns only what was appended, on the cursor's branch."""
    project, claude = _seat(world)
    path = claude / "projects" / os.listdir(claude / "projects")[0] / f"{BRANCHY_ID}.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    user = json.loads(next(x for x in lines if b'"content":"edit two"' in x and b'"type":"user"' in x))
    reply = json.loads(next(x for x in lines if b'"Reply 6 to: edit two"' in x))
    extra: list[bytes] = []
    parent = "e2af9955-d798-47a2-aa80-880e87b598a8"  # the default leaf
    for n in range(120):
        u = {**user, "uuid": f"00000000-0000-4000-8000-{n:012d}", "parentUuid": parent}
        u["message"] = {"role": "user", "content": f"turn {n}"}
        extra.append(json.dumps(u, separators=(",", ":")).encode() + b"\n")
        parent = u["uuid"]
    big = {**reply, "uuid": "00000000-0000-4000-8000-999999999999", "parentUuid": parent}
    big["message"] = {**reply["message"], "content": [{"type": "text", "text": "x" * (MAX_STRING_UNITS + 10)}]}
    extra.append(json.dumps(big, separators=(",", ":")).encode() + b"\n")
    with path.open("ab") as f:
        f.write(b"".join(extra))
    cid = world.claude_cid(project, BRANCHY_ID)
    first = world.open(cid)
    assert first["ok"], first
    assert len(first["page"]["parts"]) == MAX_PARTS_PER_PAGE and first["cursor"] is not None
    parts, last = world.read_all(cid)
    items = assemble(parts)
    assert items[-1]["blocks"][0]["text"] == "x" * (MAX_STRING_UNITS + 10)
    assert any(b["kind"] == "fragment" for p in parts for b in p["blocks"])
    # Follow: a new turn on the default branch, then one on the older branch (the leaf moves there).
    assert world.follow(last)["page"]["parts"] == []
    last = world.open(cid)
    while last["cursor"] is not None:
        last = world.next(last["cursor"]["id"], cid, last["page"]["branch"])
    more = {**user, "uuid": "00000000-0000-4000-8000-777777777777", "parentUuid": big["uuid"]}
    more["message"] = {"role": "user", "content": "appended"}
    with path.open("ab") as f:
        f.write(json.dumps(more, separators=(",", ":")).encode() + b"\n")
    grown = world.follow(last)
    assert _texts(grown["page"]["parts"]) == ["appended"] and grown["page"]["branch"] == EDIT
    elsewhere = {**more, "uuid": "00000000-0000-4000-8000-888888888888",
                 "parentUuid": "da31f2cb-c6e5-44ab-8047-fa171c00d30e", "message": {"role": "user", "content": "old"}}
    lp = {"type": "last-prompt", "lastPrompt": "old", "leafUuid": elsewhere["uuid"], "sessionId": BRANCHY_ID}
    with path.open("ab") as f:
        f.write(json.dumps(elsewhere).encode() + b"\n" + json.dumps(lp).encode() + b"\n")
    again = world.follow(grown)
    assert again["page"]["parts"] == [] and again["view"]["defaultBranch"] == "main"


def test_L1_the_harness_is_named_in_the_catalogue_beside_pi_rows_and_routes_serve_it(
        world: World, server: ReaderServer) -> None:
    pi = materialise(world.top, "proj-rpc", ["plain.jsonl"])
    world.approve(pi)
    project, _ = _seat(world)
    status, body = world.http(server.url, "/conversations", token=server.token)
    assert status == 200
    assert sorted((r["harness"], r["file"]) for r in body["conversations"]) == [
        ("claude-code", f"{BRANCHY_ID}.jsonl"), ("pi", "plain.jsonl")]
    cid = world.claude_cid(project, BRANCHY_ID)
    status, page = world.http(server.url, f"/conversations/{cid}?branch=main", cid, token=server.token)
    assert status == 200 and page["page"]["branch"] == "main" and page["page"]["conversation"] == cid


# -- L2: another version ---------------------------------------------------------------------------------


def test_L2_a_transcript_from_another_version_is_unsupported_harness_in_the_catalogue_and_on_open(world: World) -> None:
    project = world.top / "proj"
    project.mkdir()
    claude = world.top / "claude"
    data = claude_transcript(BRANCHY, os.path.realpath(project))
    write_claude(claude, project, BRANCHY_ID, data.replace(b'"version":"2.1.283"', b'"version":"2.1.300"'))
    later = data.splitlines(keepends=True)
    at = max(i for i, x in enumerate(later) if b'"uuid"' in x)
    later[at] = later[at].replace(b'"version":"2.1.283"', b'"version":"2.1.284"')
    write_claude(claude, project, AGENT_ID, b"".join(later))  # first entry 2.1.283, a later one 2.1.284
    write_receipt(project, "claude", BRANCHY_ID, AGENT_ID)
    world.approve_claude(project, claude)
    rows = {r["sessionId"]: r for r in world.catalogue()["conversations"]}
    assert rows[BRANCHY_ID]["refusal"]["code"] == "unsupported-harness"  # the catalogue reads the head
    assert rows[AGENT_ID]["refusal"] is None  # its head is 2.1.283 ...
    assert _refusal(world.open(rows[BRANCHY_ID]["id"])) == ("unsupported-harness", False)
    assert _refusal(world.open(rows[AGENT_ID]["id"])) == ("unsupported-harness", False)  # ... the whole is not


def test_L2_a_follow_refuses_appended_entries_of_another_version(world: World) -> None:
    project, claude = _seat(world)
    cid = world.claude_cid(project, BRANCHY_ID)
    _, last = world.read_all(cid)
    path = next((claude / "projects").rglob(f"{BRANCHY_ID}.jsonl"))
    line = path.read_bytes().splitlines(keepends=True)[-3]  # an assistant entry
    obj = json.loads(line)
    obj.update(uuid="00000000-0000-4000-8000-000000000042", version="2.1.300")
    with path.open("ab") as f:
        f.write(json.dumps(obj).encode() + b"\n")
    assert _refusal(world.follow(last)) == ("unsupported-harness", False)


# -- L3: a decoy never listed, never opened --------------------------------------------------------------


def test_L3_a_decoy_session_file_named_in_no_receipt_is_never_listed_never_opened(world: World) -> None:
    project, claude = _seat(world)
    slug_dir = next((claude / "projects").iterdir())
    decoy = write_claude(claude, project, DECOY_ID, claude_transcript(AGENT, os.path.realpath(project)),
                         slug=slug_dir.name)
    rows = world.catalogue()["conversations"]
    assert [r["sessionId"] for r in rows] == [BRANCHY_ID]  # only what the receipt names
    cid = rows[0]["id"]
    parts, last = world.read_all(cid)
    for b in world.open(cid)["view"]["branches"]:
        world.read_all(cid, b["name"])
    world.follow(last)
    # Its would-be ids are unknown: the reader never names it.
    assert _refusal(world.open(world.claude_cid(project, DECOY_ID))) == ("unknown-conversation", True)
    assert _refusal(world.open(world.cid(project, decoy.name, "claude"))) == ("unknown-conversation", True)
    opened = set().union(*world.opened_log)
    assert str(decoy) not in opened and str(decoy.resolve()) not in opened
    assert not any(DECOY_ID in p for p in opened)


# -- L4: outside the root, a symlink, another project ----------------------------------------------------


@pytest.mark.parametrize("line", ["../../outside/x", "/etc/passwd", f"{BRANCHY_ID}/../../x", "notes.txt",
                                  AGENT_ID.upper(), f"{BRANCHY_ID}.jsonl"])
def test_L4_a_receipt_line_that_is_not_a_session_id_is_refused_and_nothing_is_opened(world: World, line: str) -> None:
    project, _ = _seat(world, receipt=(line,))
    outside = world.top / "outside"
    outside.mkdir()
    (outside / "x.jsonl").write_bytes(claude_transcript(BRANCHY, os.path.realpath(project)))
    rows = world.catalogue()["conversations"]
    assert len(rows) == 1 and rows[0]["refusal"]["code"] == "unsafe-path" and rows[0]["sessionId"] is None
    assert _refusal(world.open(rows[0]["id"])) == ("unsafe-path", False)
    opened = set().union(*world.opened_log)
    assert not any(p.endswith(".jsonl") for p in opened)


def test_L4_a_symlinked_transcript_is_unsafe_path_and_its_target_never_opened(world: World) -> None:
    project, claude = _seat(world)
    path = next((claude / "projects").rglob(f"{BRANCHY_ID}.jsonl"))
    target = world.top / "elsewhere.jsonl"
    path.rename(target)
    path.symlink_to(target)
    cid = world.claude_cid(project, BRANCHY_ID)
    assert world.catalogue()["conversations"][0]["refusal"]["code"] == "unsafe-path"
    assert _refusal(world.open(cid)) == ("unsafe-path", False)
    assert str(target) not in set().union(*world.opened_log)


def test_L4_a_project_directory_that_is_a_symlink_out_of_the_root_is_never_looked_into(world: World) -> None:
    project, claude = _seat(world)
    slug_dir = next((claude / "projects").iterdir())
    outside = world.top / "outside-projects"
    slug_dir.rename(outside)
    slug_dir.symlink_to(outside)
    row = world.catalogue()["conversations"][0]
    assert row["refusal"]["code"] == "unsafe-path" and "symlink" in row["refusal"]["message"]
    assert _refusal(world.open(row["id"])) == ("unsafe-path", False)
    assert not any(p.startswith(str(outside)) for p in set().union(*world.opened_log))


def test_L4_another_projects_session_is_foreign_project(world: World) -> None:
    """The receipt names a session the binary ran in another project: its transcript is found (in that
    project's directory) and refused by its first entry's cwd, as F9 refuses a Pi header's."""
    project, claude = _seat(world, sessions={}, receipt=(AGENT_ID,))
    other = world.top / "proj-other"
    other.mkdir()
    write_claude(claude, other, AGENT_ID, claude_transcript(AGENT, os.path.realpath(other)))
    row = world.catalogue()["conversations"][0]
    assert row["refusal"]["code"] == "foreign-project"
    assert _refusal(world.open(row["id"])) == ("foreign-project", False)


def test_L4_one_session_in_two_project_directories_or_in_none_is_refused(world: World) -> None:
    project, claude = _seat(world, receipt=(BRANCHY_ID, AGENT_ID))
    write_claude(claude, project, BRANCHY_ID, b"", slug="-another-copy")
    rows = {r["sessionId"]: r for r in world.catalogue()["conversations"]}
    assert rows[BRANCHY_ID]["refusal"]["code"] == "unsafe-path" and "2 project directories" in \
        rows[BRANCHY_ID]["refusal"]["message"]
    assert rows[AGENT_ID]["refusal"]["code"] == "unavailable"  # named, not written (yet)
    assert _refusal(world.open(rows[AGENT_ID]["id"])) == ("unavailable", False)


def test_L4_a_receipt_that_is_a_symlink_or_not_a_file_is_refused_never_followed(world: World) -> None:
    project, _ = _seat(world, receipt=())
    receipt = project / ".pi/state/claude/session-id"
    receipt.unlink()
    decoy_receipt = world.top / "other-receipt"
    decoy_receipt.write_text(f"{BRANCHY_ID}\n")
    receipt.symlink_to(decoy_receipt)
    (project / ".pi/state/claude/launches/1").mkdir(parents=True)
    (project / ".pi/state/claude/launches/1/session-id").mkdir()
    cat = world.catalogue()
    assert cat["conversations"] == []
    assert sorted(r["refusal"]["code"] for r in cat["refusedRoots"]) == ["unsafe-path", "unsafe-path"]
    assert str(decoy_receipt) not in set().union(*world.opened_log)


def test_a_claude_seat_needs_an_explicit_claude_root_and_nothing_defaults(world: World) -> None:
    project = world.top / "proj"
    write_receipt(project, "claude", BRANCHY_ID)
    world.approve_claude(project, None)
    world.approve_claude(project, "relative/claude", seat="other")
    cat = world.catalogue()
    assert cat["conversations"] == []
    assert [(r["seat"], r["refusal"]["code"]) for r in cat["refusedRoots"]] == [("claude", "unsafe-path"),
                                                                              ("other", "unsafe-path")]


def test_launch_receipts_add_sessions_in_order_each_once(world: World) -> None:
    project, claude = _seat(world, sessions={BRANCHY_ID: BRANCHY, AGENT_ID: AGENT}, receipt=(BRANCHY_ID,))
    write_receipt(project, "claude", AGENT_ID, BRANCHY_ID, launch="10")
    write_receipt(project, "claude", AGENT_ID, launch="2")
    rows = world.catalogue()["conversations"]
    assert [r["sessionId"] for r in rows] == [BRANCHY_ID, AGENT_ID]
    assert all(r["refusal"] is None for r in rows)


# -- L5: sidechains and subagents apart ------------------------------------------------------------------


def test_L5_subagent_transcripts_never_reach_the_main_conversation_and_are_never_opened(world: World) -> None:
    project, claude = _seat(world, sessions={AGENT_ID: AGENT})
    main = next((claude / "projects").rglob(f"{AGENT_ID}.jsonl"))
    sub_dir = main.parent / AGENT_ID / "subagents"
    sub_dir.mkdir(parents=True)
    sub = sub_dir / "agent-a9b91611f40df3f31.jsonl"
    sub.write_bytes(claude_transcript("subagent-transcript.jsonl", os.path.realpath(project)))
    (sub_dir / "agent-a9b91611f40df3f31.meta.json").write_bytes((CLAUDE_DATA / "subagent.meta.json").read_bytes())
    cid = world.claude_cid(project, AGENT_ID)
    parts, _ = world.read_all(cid)
    assert "SUBTASK reply please" not in _texts(parts)  # the subagent's own prompt is in its file only
    assert [i["kind"] for i in assemble(parts)] == ["user", "assistant", "toolResult", "assistant", "user",
                                                    "assistant", "user", "assistant", "toolResult", "assistant"]
    assert not any(i["attrs"].get("sidechain") for i in assemble(parts))
    assert [r["sessionId"] for r in world.catalogue()["conversations"]] == [AGENT_ID]
    assert str(sub) not in set().union(*world.opened_log)


def test_L5_sidechain_entries_in_a_main_transcript_are_a_branch_of_their_own(world: World) -> None:
    project = world.top / "proj"
    project.mkdir()
    claude = world.top / "claude"
    main = claude_transcript(AGENT, os.path.realpath(project))
    side = claude_transcript("subagent-transcript.jsonl", os.path.realpath(project))
    write_claude(claude, project, AGENT_ID, main + side)
    write_receipt(project, "claude", AGENT_ID)
    world.approve_claude(project, claude)
    cid = world.claude_cid(project, AGENT_ID)
    opened = world.open(cid)
    assert opened["view"]["defaultBranch"] == "main"
    sidechain = "b.13b35176-69c6-45f0-a2c0-ea0f9cedc535"
    assert [b["name"] for b in opened["view"]["branches"]] == ["main", sidechain]
    parts, _ = world.read_all(cid, sidechain)
    assert _texts(parts) == ["SUBTASK reply please", "Reply 21 to: SUBTASK reply please"]
    assert all(i["attrs"]["sidechain"] is True for i in assemble(parts))
    main_parts, _ = world.read_all(cid)
    assert "SUBTASK reply please" not in _texts(main_parts)


# -- L6: no writes over the Claude directory -------------------------------------------------------------


def test_L6_every_call_over_claude_seats_writes_nothing_and_opens_only_what_receipts_name(world: World) -> None:
    """F17 over the Claude directory: the catalogue, every branch of every conversation to its last page and
    a follow, each inside the fingerprint of the whole tree (the Claude config dir included) and the
    inotify watch; decoys around them (an unreceipted transcript, a subagent transcript, another project's
    session, the config dir's own files) are never opened."""
    project, claude = _seat(world, sessions={BRANCHY_ID: BRANCHY, AGENT_ID: AGENT})
    write_receipt(project, "claude", AGENT_ID, launch="1")
    slug_dir = next((claude / "projects").iterdir())
    decoys = [write_claude(claude, project, DECOY_ID, claude_transcript(AGENT, "/x"), slug=slug_dir.name)]
    sub = slug_dir / AGENT_ID / "subagents"
    sub.mkdir(parents=True)
    decoys.append(sub / "agent-a9b91611f40df3f31.jsonl")
    decoys[-1].write_bytes(claude_transcript("subagent-transcript.jsonl", "/x"))
    decoys.append(write_claude(claude, world.top / "someone-else", "0ther000-0000-4000-8000-000000000000".replace(
        "0ther", "0a0b0"), b"{}\n"))
    (claude / ".claude.json").write_text('{"userID": "not read"}')
    decoys.append(claude / ".claude.json")
    before = fingerprint(world.top)
    rows = world.catalogue()["conversations"]
    assert len(rows) == 2 and all(r["refusal"] is None for r in rows)
    for row in rows:
        first = world.open(row["id"])
        for b in first["view"]["branches"]:
            _, last = world.read_all(row["id"], b["name"])
            assert world.follow(last)["ok"]
    assert fingerprint(world.top) == before
    opened = set().union(*world.opened_log)
    for decoy in decoys:
        assert str(decoy) not in opened, decoy


# -- the command line ------------------------------------------------------------------------------------


def test_mosaic_read_names_a_claude_seat_with_claude_spec_and_reads_it(world: World, tmp_path: Path) -> None:
    project, claude = _seat(world)
    pi = materialise(world.top, "proj-rpc", ["plain.jsonl"])

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mosaic.chat_pages", *argv], capture_output=True, text=True,
                              timeout=120, check=False)

    specs = ["--spec", str(pi), "alpha", "--claude-spec", str(project), "claude", str(claude)]
    listed = run(*specs, "--text", "catalogue")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    cid = world.claude_cid(project, BRANCHY_ID)
    assert any(x.startswith(cid) and x.endswith("ok  (claude-code)") for x in lines), lines
    assert any(x.startswith("pi-") and x.endswith("bytes  ok") for x in lines), lines
    opened = run("--text", "open", cid, "--branch", "main", *specs)
    assert opened.returncode == 0 and "[text] three" in opened.stdout and "branch main" in opened.stdout
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"specs": [{"projectRoot": str(project), "seat": "claude", "harness": "claude-code",
                                             "claudeRoot": str(claude)}]}))
    via_config = run("--config", str(config), "catalogue")
    assert via_config.returncode == 0 and json.loads(via_config.stdout)["conversations"][0]["id"] == cid
