"""The owner's lifecycle (brief §2 "Lifecycle", "What never releases a claim") and adoption."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from claim_helpers import (
    BINDING,
    ENGINE,
    HOST,
    SEAT,
    SESSION,
    Hook,
    Liveness,
    Probe,
    cohort_proof,
    cohort_ref,
    make_store,
    raw_head,
    raw_holders,
    raw_records,
    read_line,
    run_lifecycle,
    tree_bytes,
)

from mosaic.safe_open import ProcessRef
from mosaic.writer_claim import (
    Claim,
    ClaimRefusal,
    ClaimStore,
    Outcome,
    ProofKind,
    ProofRef,
    State,
    UnitObservation,
)
from mosaic.writer_claim.model import MAX_COHORT_BYTES, ProcessIdentity, Writer
from mosaic.writer_claim.store import Barrier


def test_each_step_publishes_seat_then_session_and_release_frees_session_first(claim_root: Path) -> None:
    """§2: "Keys are always taken seat first, then session, and released in the reverse order"; "Each
    step publishes the new state on the seat key, then on the session key"."""
    linked: list[tuple[str, str]] = []

    def record(b: Barrier) -> None:
        if b.point == "linked":
            linked.append((b.step, "seat" if b.key == SEAT.dirname else "session"))

    run_lifecycle(make_store(claim_root, barrier=record), lambda c, s: None)
    assert linked == [
        ("reserve", "seat"), ("reserve", "session"),
        ("spawn-marker", "seat"), ("spawn-marker", "session"),
        ("active", "seat"), ("active", "session"),
        ("stopping", "seat"), ("stopping", "session"),
        ("stopped", "session"), ("stopped", "seat"),
    ]


def test_publication_protocol_order(claim_root: Path) -> None:
    """§2 "Atomic publication": temp write, its fsync, link() to the next name, directory fsync; the
    temporary name is removed afterwards, and no revision name is ever created any other way."""
    seen: list[Barrier] = []
    make_store(claim_root, barrier=seen.append).acquire(SEAT, SESSION, BINDING)
    seat_steps = [b.point for b in seen if b.key == SEAT.dirname and b.point != "between-keys"]
    assert seat_steps == ["key-dir-created", "root-fsynced", "temp-created", "temp-written", "temp-fsynced",
                          "linked", "dir-fsynced", "temp-unlinked"]
    link = next(b for b in seen if b.point == "linked" and b.key == SEAT.dirname)
    assert link.name == "r0000000001.json" and link.source is not None and link.source.startswith(".tmp-")
    created = [b.name for b in seen if b.point == "temp-created"]
    assert all(n is not None and n.startswith(".tmp-") for n in created)
    assert sorted(os.listdir(claim_root / SEAT.dirname)) == ["r0000000001.json"]


def test_W20_owner_cannot_release_with_no_unit_after_the_spawn_marker(claim_root: Path) -> None:
    """A no-unit observation is valid only when no spawn marker was published: release with one after
    the marker is a programming error, and nothing is published."""
    c = make_store(claim_root).acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    before = tree_bytes(claim_root)
    absent = UnitObservation(c.unit_name, "absent").no_unit_proof(c.claim_id, make_store(claim_root).host)
    with pytest.raises(ValueError, match="spawn marker"):
        c.release(absent)
    with pytest.raises(ValueError, match="spawn marker"):
        c.release(ProofRef.never_spawned(c.claim_id, "test"))
    assert tree_bytes(claim_root) == before
    assert c.state is State.RESERVED


def test_release_before_the_spawn_marker_with_no_unit_frees_the_pair(claim_root: Path) -> None:
    """A launch abandoned before the marker: nothing was spawned, so a no-unit reference allows stopped
    (through stopping, as every release)."""
    c = make_store(claim_root).acquire(SEAT, SESSION, BINDING)
    c.release(ProofRef.never_spawned(c.claim_id, "launch abandoned"))
    assert [r["state"] for r in raw_records(claim_root, SEAT.dirname)] == ["reserved", "stopping", "stopped"]  # type: ignore[index]
    assert raw_holders(claim_root, SEAT, SESSION) == set()


def test_an_owner_never_publishes_a_boot_proof(claim_root: Path) -> None:
    c = make_store(claim_root).acquire(SEAT, SESSION, BINDING)
    boot = ProofRef(ProofKind.BOOT, "sha256:" + "0" * 64)
    with pytest.raises(ValueError, match="boot proof"):
        c.release(boot)


def test_lifecycle_guards(claim_root: Path) -> None:
    """Steps out of order are programming errors and publish nothing."""
    c = make_store(claim_root).acquire(SEAT, SESSION, BINDING)
    before = tree_bytes(claim_root)
    with pytest.raises(ValueError):
        c.record_engine("inv", ProcessRef(1, 1))  # before the spawn marker
    with pytest.raises(ValueError):
        c.activate(invocation_id="inv", engine=ProcessRef(1, 1))  # before the spawn marker
    assert tree_bytes(claim_root) == before
    c.mark_spawn()
    with pytest.raises(ValueError):
        c.activate()  # no invocation ID or engine identity yet
    c.record_engine("inv", ProcessRef(1, 1))
    c.activate()
    with pytest.raises(ValueError):
        c.mark_spawn()
    c.set_generation(2)
    c.begin_stop("s1", confirmation="conf", phase="term")
    c.begin_stop("s1", confirmation="conf", phase="kill")
    c.release(cohort_proof("s1"))
    recs = raw_records(claim_root, SESSION.dirname)
    assert [(r["state"], r["reason"]) for r in recs] == [  # type: ignore[index]
        ("reserved", "reserve"), ("reserved", "spawn-marker"), ("reserved", "engine"), ("active", "active"),
        ("active", "generation"), ("stopping", "stopping"), ("stopping", "stopping"), ("stopped", "stopped"),
    ]
    assert recs[-1]["generation"] == 2 and recs[-1]["stop"]["phase"] == "kill"  # type: ignore[index]
    with pytest.raises(ValueError):
        c.mark_uncertain()  # stopped is final


def test_a_step_retried_after_an_error_between_the_keys_is_not_published_twice(claim_root: Path) -> None:
    hook = Hook()
    c = make_store(claim_root, barrier=hook).acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    fail = [True]

    def enospc_between_keys(b: Barrier) -> None:
        if b.point == "between-keys" and fail[0]:
            fail[0] = False
            raise OSError(28, "No space left on device")

    hook.action = enospc_between_keys
    cohort = cohort_ref(c.claim_id, HOST, "inv")
    with pytest.raises(OSError):
        c.activate(invocation_id="inv", engine=ProcessRef(1, 1), cohort=cohort)
    c.activate(invocation_id="inv", engine=ProcessRef(1, 1), cohort=cohort)
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [r["state"] for r in recs] == ["reserved", "reserved", "active"]  # type: ignore[index]
        assert recs[-1]["cohort"] == cohort  # type: ignore[index]


def test_the_engine_uid_is_recorded_with_the_spawn_marker_and_carried_to_the_end(claim_root: Path) -> None:
    """Issue 28 item 3: the uid allocated for this execution's engine is published with the spawn marker, on
    both keys, before anything runs as it, and is in every later revision up to stopped (format /4), so an
    allocator reading the claim sees which claim names the uid until it is stopped with a proof. A restart
    and an adoption after a crash between the keys carry it from the key that knows it."""
    store = make_store(claim_root)
    c = store.acquire(SEAT, SESSION, BINDING)
    assert c.engine_uid is None
    c.mark_spawn(engine_uid=61234)
    assert c.engine_uid == 61234 and c.head("seat").engine_uid == c.head("session").engine_uid == 61234
    c.record_engine("inv-1", ENGINE, cohort=cohort_ref(c.claim_id, store.host, "inv-1"))
    c.activate()
    c.release(cohort_proof("stop-1"))
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [(r["reason"], r.get("engineUid"), r["format"]) for r in recs] == [  # type: ignore[index]
            ("reserve", None, "mosaic-writer-claim/2"), *[(reason, 61234, "mosaic-writer-claim/4") for reason in (
                "spawn-marker", "engine", "active", "stopping", "stopped")]]
    # Half-done: the spawn marker (with the uid) reached the seat key only, then the owner died.
    hook = Hook()
    crashing = make_store(claim_root, pid=2000, barrier=hook)
    c2 = crashing.acquire(SEAT, SESSION, BINDING)

    def die_between_keys(b: Barrier) -> None:
        if b.point == "between-keys" and b.step == "spawn-marker":
            raise KeyboardInterrupt  # a BaseException: the crash leaves the root as it is

    hook.action = die_between_keys
    with pytest.raises(KeyboardInterrupt):
        c2.mark_spawn(engine_uid=61235)
    assert raw_head(claim_root, SESSION.dirname)[1].get("engineUid") is None  # type: ignore[index]
    restarter = make_store(claim_root, pid=3000, liveness=Liveness(alive={3000}))
    restarter.restart(SEAT, SESSION, Probe({c2.unit_name: "present"}))
    adopted = restarter.adopt(SEAT, SESSION, c2.claim_id)
    assert adopted.engine_uid == 61235 and adopted.head("session").engine_uid == 61235


def test_the_cohort_reference_is_recorded_once_and_carried_to_the_end(claim_root: Path) -> None:
    """The launcher's cohort reference, recorded with the engine (§2 "Lifecycle" 2), is in every later
    revision of the claim on both keys, unchanged, up to stopped: a restarted controller force stops and
    asks for a boot proof from it (§6, K10, K11, W7). A later step cannot change or drop it, nor the
    invocation ID or the engine; a refused step publishes nothing."""
    store = make_store(claim_root)
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    assert c.cohort is None
    cohort = cohort_ref(c.claim_id, store.host, "inv-1")
    c.record_engine("inv-1", ENGINE, cohort=cohort)
    assert c.cohort == cohort and c.head("session").cohort == cohort
    before = tree_bytes(claim_root)
    other = {**cohort, "invocationId": "inv-2"}
    with pytest.raises(ValueError, match="cohort"):
        c.activate(cohort=other)
    with pytest.raises(ValueError, match="invocation_id"):
        c.record_engine("inv-2", ENGINE)
    with pytest.raises(ValueError, match="engine"):
        c.activate(engine=ProcessRef(ENGINE.pid, ENGINE.start_time + 1))
    assert tree_bytes(claim_root) == before
    c.activate()  # keeps what was recorded
    c.record_engine("inv-1", ENGINE, cohort=cohort)  # the same again: a retried step, nothing new
    c.set_generation(2)
    c.begin_stop("stop-1", confirmation="conf-1", phase="term")
    c.mark_uncertain()
    c.release(cohort_proof("stop-1"))
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [r["reason"] for r in recs] == [  # type: ignore[index]
            "reserve", "spawn-marker", "engine", "active", "generation", "stopping", "uncertain", "stopping",
            "stopped"]
        assert [r["cohort"] for r in recs] == [None, None] + [cohort] * 7  # type: ignore[index]
        assert {(r["invocationId"], r["engine"]["pid"]) for r in recs[2:]} == {("inv-1", 4242)}  # type: ignore[index]


def test_a_cohort_reference_is_refused_before_anything_is_published(claim_root: Path) -> None:
    """Before the spawn marker, or not a bounded JSON object: ValueError, and nothing on disk changes."""
    c = make_store(claim_root).acquire(SEAT, SESSION, BINDING)
    cohort = cohort_ref(c.claim_id, HOST, "inv")
    before = tree_bytes(claim_root)
    with pytest.raises(ValueError):
        c.record_engine("inv", ENGINE, cohort=cohort)  # before the spawn marker
    with pytest.raises(ValueError):
        c.activate(invocation_id="inv", engine=ENGINE, cohort=cohort)  # before the spawn marker
    assert tree_bytes(claim_root) == before
    c.mark_spawn()
    before = tree_bytes(claim_root)
    for bad in ({"pad": "x" * MAX_COHORT_BYTES}, {"when": float("nan")}, {"pids": {4242}}):
        with pytest.raises(ValueError):
            c.activate(invocation_id="inv", engine=ENGINE, cohort=bad)
    assert tree_bytes(claim_root) == before
    assert c.state is State.RESERVED and c.cohort is None


def test_a_foreign_revision_on_a_held_key_stops_the_owner(claim_root: Path) -> None:
    """An owner whose next link() loses found another writer on a key it holds: it refuses
    unsafe-replacement and publishes nothing more."""
    from claim_helpers import write_revision  # noqa: PLC0415

    c = make_store(claim_root).acquire(SEAT, SESSION, BINDING)
    head = c.head("seat")
    write_revision(claim_root, head.evolve(number=2, state=State.UNCERTAIN, reason="someone-else"))
    with pytest.raises(ClaimRefusal) as e:
        c.mark_spawn()
    assert e.value.code == "unsafe-replacement"
    assert [r["reason"] for r in raw_records(claim_root, SESSION.dirname)] == ["reserve"]  # type: ignore[index]


_OWNER_CHILD = textwrap.dedent(
    """
    import sys
    from mosaic.safe_open import ProcessRef
    from mosaic.writer_claim import *
    root, mode = sys.argv[1], sys.argv[2]
    store = ClaimStore(root)
    c = store.acquire(SeatKey("seat-a", "/fixtures/project", "main"),
                      SessionKey("pi", "01a22a58-944f-7072-a9ab-f808835fc6a2"),
                      Binding("binding-1", "pi", "pi-conversation-1", "main", "leaf-1",
                              Pins("0.85.1", "ab" * 32, "sha256:" + "cd" * 32)))
    c.mark_spawn()
    c.activate(invocation_id="inv-child", engine=ProcessRef(4242, 99))
    print(c.claim_id, flush=True)
    if mode == "eof":
        sys.stdin.read()          # the client side closes: EOF, then the owner exits without releasing
        store.close()             # a disconnect
    else:
        sys.stdin.read()          # waits here for SIGTERM (default action: terminate)
    """
)


@pytest.mark.parametrize("mode", ["sigterm", "eof"])
def test_what_never_releases_a_claim(claim_root: Path, mode: str) -> None:
    """§2 "What never releases a claim": the owner's EOF and disconnect, or SIGTERM, change nothing on
    disk; the pair stays held, and a restart classifies it (never frees it) when the unit is alive.
    (agent_settled, idle and an abort acknowledgement cannot even be expressed: see
    test_record.py::test_only_three_proof_kinds_allow_stopped.)"""
    child = subprocess.Popen([sys.executable, "-c", _OWNER_CHILD, str(claim_root), mode],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    try:
        assert child.stdout is not None and child.stdin is not None
        claim_id = read_line(child.stdout).strip()
        assert claim_id.startswith("claim-")
        before = tree_bytes(claim_root)
        if mode == "sigterm":
            child.send_signal(signal.SIGTERM)
            assert child.wait(timeout=60) == -signal.SIGTERM
        else:
            child.stdin.close()
            assert child.wait(timeout=60) == 0
        assert tree_bytes(claim_root) == before
        assert raw_holders(claim_root, SEAT, SESSION) == {claim_id}
        report = ClaimStore(claim_root).restart(SEAT, SESSION, Probe(default="present"))
        assert report.outcomes == (Outcome.UNCERTAIN_UNIT,) and not report.free
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=60)


def test_closing_the_store_or_dropping_the_handle_changes_nothing(claim_root: Path) -> None:
    store = make_store(claim_root)
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    before = tree_bytes(claim_root)
    del c
    store.close()
    assert tree_bytes(claim_root) == before
    assert len(raw_holders(claim_root, SEAT, SESSION)) == 1


def test_adopt_refusals(claim_root: Path) -> None:
    """Adoption needs the claim's owner proven gone, both keys agreeing, and this boot."""
    c = make_store(claim_root, pid=2000).acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=3000, liveness=Liveness(alive={2000})).adopt(SEAT, SESSION, c.claim_id)
    assert e.value.code == "already-active"
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=3000).adopt(SEAT, SESSION, "claim-" + "0" * 32)
    assert e.value.code == "unsafe-replacement"
    adopted = make_store(claim_root, pid=3000, liveness=Liveness(alive={3000})).adopt(SEAT, SESSION, c.claim_id)
    assert adopted.head("seat").owner.process.pid == 3000 and adopted.spawn_marker
    # The adopter is alive now: nobody else may adopt or reclassify it.
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=3001, liveness=Liveness(alive={3000})).adopt(SEAT, SESSION, c.claim_id)
    assert e.value.code == "already-active"


def test_two_adopters_at_once_the_loser_refuses_already_active_while_the_winner_lives(claim_root: Path) -> None:
    """Issue 28 item 6: two controllers starting at once on a crashed controller's claim both find its owner
    gone and both adopt; one link() wins each key. The loser, whose seat key link() found the winner's
    adopt revision there, refused unsafe-replacement ("another writer published"), which sends an operator
    to repair a claim that is fine. It refuses already-active when the revision that beat it was written
    by a process that is alive (the winner), and still unsafe-replacement when that writer is gone too."""
    c = make_store(claim_root, pid=2000).acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()  # owner 2000 then dies (no liveness below names it)
    rounds = ((3000, 3001, {3000, 3001}, "already-active"),  # the winner lives
              (4000, 4001, {4001}, "unsafe-replacement"))  # the winner is gone by the time the loser looks
    for winner_pid, loser_pid, alive, expected in rounds:
        winner = make_store(claim_root, pid=winner_pid, liveness=Liveness())  # every earlier owner is gone
        hook = Hook()
        loser = make_store(claim_root, pid=loser_pid, liveness=Liveness(alive=alive), barrier=hook)

        def winner_first(b: Barrier, winner: ClaimStore = winner, hook: Hook = hook) -> None:
            # The loser has read the pair (its owner gone) and is about to link its seat key: the winner adopts.
            if b.point == "temp-written" and b.step == "adopt" and hook.action is not None:
                hook.action = None
                winner.adopt(SEAT, SESSION, c.claim_id)

        hook.action = winner_first
        with pytest.raises(ClaimRefusal) as e:
            loser.adopt(SEAT, SESSION, c.claim_id)
        assert e.value.code == expected, e.value
        if expected == "already-active":
            assert f"pid {winner_pid}" in e.value.message, e.value
        owners = {rec["owner"]["pid"] for _, rec in (raw_head(claim_root, SEAT.dirname),
                                                      raw_head(claim_root, SESSION.dirname)) if rec}
        assert owners == {winner_pid}  # the winner's adoption, whole; nothing of the loser's


def test_store_requires_its_claim_root() -> None:
    """No default claim root (§2 "Location"; DESIGN principle 3)."""
    with pytest.raises(TypeError):
        ClaimStore()  # type: ignore[call-arg]


def test_an_io_error_on_the_session_key_gives_the_seat_key_back(claim_root: Path) -> None:
    """An I/O error after the seat key was taken (here: ENOSPC creating the session key's temporary
    file) raises, and the seat reservation is followed by stopped (never spawned) so the pair is free."""

    def enospc_on_session(b: Barrier) -> None:
        if b.point == "temp-created" and b.key == SESSION.dirname:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        make_store(claim_root, barrier=enospc_on_session).acquire(SEAT, SESSION, BINDING)
    recs = raw_records(claim_root, SEAT.dirname)
    assert [(r["state"], r["reason"]) for r in recs] == [("reserved", "reserve"), ("stopped", "follow-up")]  # type: ignore[index]
    assert recs[1]["proof"]["detail"]["basis"] == "never-spawned"  # type: ignore[index]
    assert raw_holders(claim_root, SEAT, SESSION) == set()
    assert [n for n in os.listdir(claim_root / SESSION.dirname) if n.startswith(".tmp-")] == []
    make_store(claim_root, pid=2002).acquire(SEAT, SESSION, BINDING)


def test_an_owner_step_is_written_by_this_store_as_owner_whoever_wrote_the_last_revision(claim_root: Path) -> None:
    """Every step a claim publishes names this store's process and incarnation as its writer, role owner
    (the writer of the last revision is reused only when it is exactly that): a claim over heads another
    writer published (here a restart's) writes its next revisions as this store's owner."""
    store = make_store(claim_root, pid=2000)
    c = store.acquire(SEAT, SESSION, BINDING)
    other = Writer(ProcessIdentity(3000, 13000, "pid:[test]"), "inc-3000", "restart")
    over = Claim(store, c.head("seat").evolve(writer=other), c.head("session").evolve(writer=other))
    over.mark_spawn()
    for key in (SEAT, SESSION):
        assert raw_records(claim_root, key.dirname)[-1]["writer"] == {  # type: ignore[index]
            "pid": 2000, "startTime": 12000, "pidNamespace": "pid:[test]", "incarnation": "inc-2000", "role": "owner"}
    assert over.head("seat").writer == Writer(store.process, store.incarnation, "owner")
