"""Claude's idle transcript drift check (issue 32 item 3; `engines/claude/_drift`) and K8's parent half on a
transcript the pinned binary wrote (fixtures/claude-2.1.283/trees/linear: three launches of one session, the
second and third `--resume`d), split where a launch ended: the first launch's bytes are the claim's baseline
(read by `read_transcript`, given by `ClaudeEngine.drift`), the later launches' bytes what the engine
appends. The engine's list is what the binary's stream names of them: its `user` and `assistant` entries of
the main thread, in order (the same uuids: checked on the real binary by
`tests_smoke/test_claude_real.py::test_claude_real_drift_...`), and `ClaudeWire` collects it from a
recording (the last test here)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from claude_recorded import FIXTURES, claude_harness, feed_each, initialized, outs, recording, wire

from mosaic.claude_rpc.testing.recordings import U1
from mosaic.controller.engines import (
    Checkpoint,
    EngineList,
    FileIdentity,
    SessionBytes,
    session_bytes,
    stat_verdict,
)
from mosaic.controller.engines.claude import CLAUDE_RULES, ClaudeSpec, claude_slug

TREE = FIXTURES / "claude-2.1.283" / "trees" / "linear" / "claude" / "projects" / \
    "-tmp-mosaic-claude-fixtures-trees-linear-proj"
SID = "ff152d22-ac45-42dd-b8bb-2694974c365a"
LINES = (TREE / f"{SID}.jsonl").read_bytes().splitlines(keepends=True)
FIRST, SECOND = 18, 29  # the first launch wrote lines 1-18, the second 19-29, the third 30-43
LEAF = "26a26bc4"  # the first launch's last-prompt leaf (prefix); line 21, the second launch's prompt, hangs on it


def told(lines: Sequence[bytes]) -> EngineList:
    """What the stream names of `lines`: their main-thread user and assistant entries."""
    out = []
    for raw in lines:
        entry = json.loads(raw)
        if entry.get("type") in ("user", "assistant") and not entry.get("isSidechain"):
            out.append({"uuid": entry["uuid"], "type": entry["type"], "sessionId": entry["sessionId"]})
    return EngineList(tuple(out), None)


def edited(raw: bytes, **fields: Any) -> bytes:
    entry = json.loads(raw)
    entry.update(fields)
    return json.dumps(entry, separators=(",", ":")).encode() + b"\n"


class Transcript:
    """The tree's first launch as a claimed transcript under `root`, and its baseline as the engine gives it."""

    def __init__(self, root: Path, lines: Sequence[bytes] = LINES[:FIRST]) -> None:
        project = root / "proj"
        project.mkdir(parents=True)
        config = root / "claude"
        self.path = config / "projects" / claude_slug(str(project)) / f"{SID}.jsonl"
        self.path.parent.mkdir(parents=True)
        if lines:
            self.path.write_bytes(b"".join(lines))
        engine = ClaudeSpec(project=str(project), seat="alpha", scratch=str(root / "scratch"), command=("fake",),
                            config_dir=str(config)).engine()
        self.config = engine.drift(engine.read(engine.place(str(self.path))))

    def append(self, data: bytes) -> None:
        with open(self.path, "ab") as f:
            f.write(data)

    def read(self, checkpoint: Checkpoint) -> SessionBytes:
        st = os.stat(self.path)
        return session_bytes(self.path.read_bytes(), FileIdentity(st.st_dev, st.st_ino, st.st_size),
                             checkpoint.identity.size)

    def check(self, checkpoint: Checkpoint, engine: EngineList) -> Any:
        return CLAUDE_RULES.check_appended(engine, self.read(checkpoint), checkpoint=checkpoint)


def baseline(t: Transcript) -> Checkpoint:
    assert t.config is not None and t.config.session_id == SID and t.config.baseline is not None
    return t.config.baseline


def test_claude_drift_the_baseline_is_the_claims_read_and_the_engines_own_appends_pass_incrementally(
        tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    base = baseline(t)
    assert base.identity.size == len(b"".join(LINES[:FIRST])) and base.lines == FIRST and base.entries == 0
    assert base.last_id is not None and base.last_id.startswith(LEAF)
    idle = t.check(base, EngineList((), None))  # the takeover check: nothing new
    assert not idle.drift and idle.checkpoint == base
    t.append(b"".join(LINES[FIRST:SECOND]))
    second = t.check(base, told(LINES[FIRST:SECOND]))
    assert not second.drift and second.incremental, second
    nxt = second.checkpoint
    assert nxt is not None and nxt.entries == 4 and nxt.lines == SECOND
    assert nxt.last_id == told(LINES[FIRST:SECOND]).entries[-1]["uuid"]
    t.append(b"".join(LINES[SECOND:]))
    third = t.check(nxt, told(LINES[SECOND:]))
    assert not third.drift and third.checkpoint is not None and third.checkpoint.lines == len(LINES), third


def test_issue27_claude_a_foreign_append_between_turns_is_drift_before_the_next_prompt(tmp_path: Path) -> None:
    """Another writer appends a turn (a user and an assistant entry the engine's stream never named) while the
    engine is idle: the prompt's look sees the file grew (the check runs before the prompt), and the check
    finds `unknown-id`, not a persistence reason (nothing says the engine's own writes are torn)."""
    t = Transcript(tmp_path)
    t.append(b"".join(LINES[FIRST:SECOND]))
    clean = t.check(baseline(t), told(LINES[FIRST:SECOND])).checkpoint
    assert clean is not None
    st = os.stat(t.path)
    assert stat_verdict(FileIdentity(st.st_dev, st.st_ino, st.st_size), verified=clean.identity,
                        checkpoint=clean) is True  # untouched: the prompt runs
    t.append(b"".join(LINES[SECOND:]))  # the third launch's turn, written by someone else
    st = os.stat(t.path)
    assert stat_verdict(FileIdentity(st.st_dev, st.st_ino, st.st_size), verified=clean.identity,
                        checkpoint=clean) is False  # grew: the check runs first
    verdict = t.check(clean, EngineList((), None))
    assert verdict.drift and verdict.reason == "unknown-id", verdict
    assert verdict.reason not in CLAUDE_RULES.persistence_drift
    assert verdict.line is not None and LINES[verdict.line - 1].startswith(b'{"parentUuid"')


def test_claude_drift_a_torn_tail_and_a_torn_line_the_engine_wrote_after(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    base = baseline(t)
    t.append(LINES[FIRST][:40])
    torn = t.check(base, EngineList((), None))
    assert torn.drift and torn.reason == "partial-line" and torn.reason in CLAUDE_RULES.persistence_drift
    t.append(b"\n" + b"".join(LINES[FIRST + 1:SECOND]))
    after = t.check(base, told(LINES[FIRST:SECOND]))
    assert after.drift and after.reason == "invalid-line" and after.line == FIRST + 1, after


def test_claude_drift_an_entry_the_engine_named_but_the_file_lacks_is_disk_behind(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    t.append(b"".join(LINES[FIRST:25]))  # the turn's last assistant entry (line 26) is missing
    verdict = t.check(baseline(t), told(LINES[FIRST:SECOND]))
    assert verdict.drift and verdict.reason == "disk-behind" and verdict.reason in CLAUDE_RULES.persistence_drift


def test_claude_drift_a_rewritten_prefix_a_duplicate_and_another_session(tmp_path: Path) -> None:
    t = Transcript(tmp_path)
    base = baseline(t)
    data = bytearray(t.path.read_bytes())
    data[100:101] = b"X" if data[100:101] != b"X" else b"Y"
    t.path.write_bytes(bytes(data))
    assert t.check(base, EngineList((), None)).reason == "prefix-changed"

    t2 = Transcript(tmp_path / "b")
    again = LINES[FIRST:SECOND] + [LINES[20]]  # the prompt's entry twice
    t2.append(b"".join(again))
    assert t2.check(baseline(t2), told(LINES[FIRST:SECOND])).reason == "duplicate-id"

    t3 = Transcript(tmp_path / "c")
    t3.append(b"".join(LINES[FIRST:SECOND]) + edited(LINES[SECOND - 1], sessionId="0" * 8 + SID[8:]))
    verdict = t3.check(baseline(t3), told(LINES[FIRST:SECOND]))
    assert verdict.reason == "session-id" and verdict.line == SECOND + 1, verdict


def test_K8_claude_the_first_prompt_must_hang_on_the_recorded_leaf(tmp_path: Path) -> None:
    """K8's parent half: the execution's first prompt entry hangs on the leaf the claim recorded (the second
    launch's prompt, line 21, on the first launch's last-prompt leaf: passes above). Hung on an older entry
    (the engine continued another point of the session): `not-resumed`, drift, the execution fenced."""
    older = json.loads(LINES[13])["uuid"]  # the first launch's assistant entry, not the leaf
    t = Transcript(tmp_path)
    lines = list(LINES[FIRST:SECOND])
    lines[2] = edited(lines[2], parentUuid=older)
    t.append(b"".join(lines))
    verdict = t.check(baseline(t), told(lines))
    assert verdict.drift and verdict.reason == "not-resumed", verdict
    assert older in verdict.detail


def test_K8_claude_a_synthetic_entry_closing_an_interrupted_turn_may_stand_between_leaf_and_prompt(
        tmp_path: Path) -> None:
    """After an interrupted turn the binary appends one `<synthetic>` assistant entry on the leaf before the
    first prompt (recordings/sealed-resume-after-interrupt): accepted there, hanging on the leaf; one hanging
    elsewhere is `not-resumed`; the same entry after the first prompt is a second writer's (`unknown-id`)."""
    leaf = baseline(Transcript(tmp_path / "probe")).last_id
    closing_uuid = "11111111-2222-4333-8444-555555555555"

    def closing(parent: str | None) -> bytes:
        return json.dumps({"parentUuid": parent, "isSidechain": False, "type": "assistant", "uuid": closing_uuid,
                           "sessionId": SID, "message": {"model": "<synthetic>", "role": "assistant",
                                                         "content": [{"type": "text", "text": "No response requested."}]}},
                          separators=(",", ":")).encode() + b"\n"

    lines = list(LINES[FIRST:SECOND])
    prompt = edited(lines[2], parentUuid=closing_uuid)
    for parent, want in ((leaf, None), (json.loads(LINES[13])["uuid"], "not-resumed")):
        t = Transcript(tmp_path / str(want))
        t.append(b"".join([*lines[:2], closing(parent), prompt, *lines[3:]]))
        verdict = t.check(baseline(t), told(lines))
        assert verdict.reason == want, verdict
    t = Transcript(tmp_path / "late")
    t.append(b"".join([*lines, closing(told(lines).entries[-1]["uuid"])]))
    assert t.check(baseline(t), told(lines)).reason == "unknown-id"


def test_claude_drift_a_new_session_is_checked_whole_its_first_prompt_without_a_parent(tmp_path: Path) -> None:
    """No transcript at the claim (launched `--session-id`): no baseline; no file yet is clean, then the full
    check over the file the first turn made; a first prompt with a parent is `not-resumed`."""
    t = Transcript(tmp_path, [])
    assert t.config is not None and t.config.baseline is None
    assert not CLAUDE_RULES.check(EngineList((), None), None, session_id=SID, previous=None).drift
    t.append(b"".join(LINES[:FIRST]))
    full = CLAUDE_RULES.check(told(LINES[:FIRST]), t.read(Checkpoint(FileIdentity(0, 0, 0), "", 0, 0, None)),
                              session_id=SID, previous=None)
    assert not full.drift and full.checkpoint is not None and full.checkpoint.entries == 2, full
    parented = [*LINES[:2], edited(LINES[2], parentUuid=LEAF), *LINES[3:FIRST]]
    t.path.write_bytes(b"".join(parented))
    verdict = CLAUDE_RULES.check(told(parented), t.read(Checkpoint(FileIdentity(0, 0, 0), "", 0, 0, None)),
                                 session_id=SID, previous=None)
    assert verdict.reason == "not-resumed", verdict


def test_claude_drift_cost_is_linear_in_the_appended_bytes(tmp_path: Path) -> None:
    """Counted, not timed: from a checkpoint over a 200 MiB prefix (never read here: the reader hashes it, the
    check gets its digest), the check is handed only the appended bytes and decides on them: its verdict's
    lines are the checkpoint's plus the appended ones, so it decoded those and nothing else."""
    appended = b"".join(LINES[FIRST:SECOND])
    prefix_digest = hashlib.sha256(b"a prefix of 200 MiB").hexdigest()
    size = 200 << 20
    checkpoint = Checkpoint(FileIdentity(1, 2, size), prefix_digest, 0, 10**6, baseline(Transcript(tmp_path)).last_id)
    read = SessionBytes(appended, FileIdentity(1, 2, size + len(appended)), size, prefix_digest, "f" * 64)
    verdict = CLAUDE_RULES.check_appended(told(LINES[FIRST:SECOND]), read, checkpoint=checkpoint)
    assert not verdict.drift and verdict.checkpoint is not None, verdict
    assert verdict.checkpoint.lines - checkpoint.lines == appended.count(b"\n") == SECOND - FIRST


def test_claude_wire_names_what_the_binary_wrote_and_answers_entries_only_when_idle() -> None:
    """`ClaudeWire` notes, from sealed-permission-allow's stream, the prompt (its `started` frame), the tool
    call, its result and the reply, by the uuids the binary gave them (the transcript's: verified on the binary),
    and a second `initialize` answered idle hands them to the check; a `requires_action` answer is refused."""
    h = claude_harness(U1)
    records = recording("sealed-permission-allow")
    rest = initialized(h, records)
    feed_each(h, [r for r in outs(rest)])
    w = wire(h)
    main = [r["uuid"] for r in outs(records) if r.get("type") in ("assistant", "user")
            and r.get("parent_tool_use_id") is None]
    assert [e["uuid"] for e in w.told(None)] == [U1, *main] and len(main) == 3
    for state in ("requires_action", "idle"):
        command = CLAUDE_RULES.send_entries(w, main[0], now=0.0, bound=5.0)
        assert w.next_write() is command and command.record["request"]["subtype"] == "initialize"
        w.write_done(command, accepted=len(command.data), error=None, now=0.0)
        answer = {"type": "control_response", "response": {"subtype": "success", "request_id": command.record["request_id"],
                                                             "response": {"session_state": state}}}
        w.feed(json.dumps(answer).encode() + b"\n", now=0.0)
        got = CLAUDE_RULES.entries_answer(command)
        if state == "idle":
            assert isinstance(got, EngineList) and [e["uuid"] for e in got.entries] == main[1:], got
        else:
            assert not isinstance(got, EngineList) and not got.ok and "requires_action" in got.error


def test_claude_drift_the_file_removed_replaced_shrunk_and_out_of_order_and_the_readmes_reasons(tmp_path: Path) -> None:
    """The file-level reasons as on Pi, the told entries in another order (`not-prefix`), and the README's table
    of Claude's reasons is exactly the reasons these tests see."""
    seen: set[str] = set()
    t = Transcript(tmp_path / "a")
    base = baseline(t)
    seen.add(CLAUDE_RULES.check_appended(EngineList((), None), None, checkpoint=base).reason or "")
    fresh = t.path.with_suffix(".new")
    fresh.write_bytes(t.path.read_bytes())
    os.replace(fresh, t.path)  # the same bytes, another inode
    seen.add(t.check(base, EngineList((), None)).reason or "")
    t2 = Transcript(tmp_path / "b")
    t2.path.write_bytes(b"".join(LINES[:FIRST - 1]))
    seen.add(t2.check(baseline(t2), EngineList((), None)).reason or "")
    t3 = Transcript(tmp_path / "c")
    t3.append(b"".join(LINES[FIRST:SECOND]))
    engine = told(LINES[FIRST:SECOND])
    swapped = EngineList((engine.entries[0], engine.entries[2], engine.entries[1], engine.entries[3]), None)
    seen.add(t3.check(baseline(t3), swapped).reason or "")
    assert seen == {"file-removed", "file-replaced", "file-shrank", "not-prefix"}, seen
    seen |= {"partial-line", "invalid-line", "session-id", "unknown-id", "duplicate-id", "disk-behind",
             "prefix-changed", "not-resumed"}  # the tests above
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("| reason | what was seen |", 1)[1].split("\n\n", 1)[0]
    listed = {r for row in table.splitlines()[2:] for r in row.split("|")[1].replace("`", "").replace(",", " ").split()}
    assert listed == seen, listed ^ seen
