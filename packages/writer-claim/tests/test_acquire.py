"""Acquisition and its refusals (brief §2 "Keys and claim ID", "Pair state", "Atomic publication",
"Unreadable revision"; fixtures W1-W4, W16, W17)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from claim_helpers import (
    BINDING,
    HOST,
    OTHER_MACHINE,
    SEAT,
    SEAT2,
    SESSION,
    SESSION2,
    Liveness,
    Probe,
    cohort_proof,
    make_store,
    raw_chain,
    raw_head,
    raw_holders,
    raw_records,
    run_lifecycle,
    tree_bytes,
    write_raw,
    write_revision,
)

from mosaic.safe_open import ProcessRef
from mosaic.writer_claim import ClaimRefusal, Outcome, ProofKind, State
from mosaic.writer_claim.store import Barrier


def _refused(root: Path, code: str, seat=SEAT, session=SESSION, pid: int = 3000) -> ClaimRefusal:  # type: ignore[no-untyped-def]
    before = tree_bytes(root)
    with pytest.raises(ClaimRefusal) as e:
        make_store(root, pid=pid).acquire(seat, session, BINDING)
    assert e.value.code == code, e.value
    assert e.value.reconcile is False
    assert tree_bytes(root) == before, "a refused acquisition wrote something"
    return e.value


@pytest.mark.parametrize("state", ["reserved", "spawn-marker", "active"])
def test_W2_acquire_while_reserved_or_active_refuses_already_active(claim_root: Path, state: str) -> None:
    c = make_store(claim_root, pid=2000).acquire(SEAT, SESSION, BINDING)
    if state != "reserved":
        c.mark_spawn()
    if state == "active":
        c.activate(invocation_id="inv", engine=ProcessRef(4242, 99))
    refusal = _refused(claim_root, "already-active")
    assert c.claim_id in refusal.message


@pytest.mark.parametrize("state", ["stopping", "uncertain", "stopped-without-proof"])
def test_W3_acquire_while_stopping_uncertain_or_unproven_stopped_refuses_unsafe_replacement(
    claim_root: Path, state: str
) -> None:
    c = make_store(claim_root, pid=2000).acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    c.activate(invocation_id="inv", engine=ProcessRef(4242, 99))
    if state == "stopping":
        c.begin_stop("stop-1")
    elif state == "uncertain":
        c.mark_uncertain()
    else:
        # Another writer's stopped revision with no proof reference: never free (§2 "held when its highest
        # revision is anything other than stopped with a proof reference").
        for key in ("seat", "session"):
            head = c.head(key)  # type: ignore[arg-type]
            write_revision(claim_root, head.evolve(number=head.number + 1, state=State.STOPPED, proof=None))
    _refused(claim_root, "unsafe-replacement")


def test_acquire_after_a_proven_stop_gets_a_new_claim_id(claim_root: Path) -> None:
    """A released pair is free; the next claim has a new claim ID and continues both chains."""
    first = run_lifecycle(make_store(claim_root, pid=2000), lambda c, s: None)
    c = make_store(claim_root, pid=2001).acquire(SEAT, SESSION, BINDING)
    assert c.claim_id != first
    assert c.head("seat").number == 6 and c.head("session").number == 6
    assert raw_holders(claim_root, SEAT, SESSION) == {c.claim_id}


@pytest.mark.parametrize("direction", ["same-session-other-seat", "same-seat-other-session"])
def test_W4_other_seat_or_other_session_refuses_and_writes_nothing(claim_root: Path, direction: str) -> None:
    """W4: the same session under a different seat tuple, and the reverse: both refuse, before anything
    is published (a contender reads both keys first), and the winner's revisions are untouched."""
    winner = make_store(claim_root, pid=2000).acquire(SEAT, SESSION, BINDING)
    if direction == "same-session-other-seat":
        _refused(claim_root, "already-active", seat=SEAT2, session=SESSION)
        assert not (claim_root / SEAT2.dirname).exists()
    else:
        _refused(claim_root, "already-active", seat=SEAT, session=SESSION2)
        assert not (claim_root / SESSION2.dirname).exists()
    assert raw_holders(claim_root, SEAT, SESSION) == {winner.claim_id}


def test_W4_loser_that_published_on_its_seat_key_follows_with_stopped_no_unit(claim_root: Path) -> None:
    """W4, the race: the loser read both keys free and published on its seat key; the winner then took
    the shared session key. The loser's session link() loses, it re-reads, follows its seat revision with
    stopped and a no-unit reference (it never spawned), and refuses. The winner is untouched."""
    winner_store = make_store(claim_root, pid=2000)
    won: list[str] = []

    def winner_cuts_in(b: Barrier) -> None:
        if b.point == "between-keys" and b.step == "reserve" and not won:
            won.append(winner_store.acquire(SEAT, SESSION, BINDING).claim_id)

    loser = make_store(claim_root, pid=2001, barrier=winner_cuts_in)
    with pytest.raises(ClaimRefusal) as e:
        loser.acquire(SEAT2, SESSION, BINDING)
    assert e.value.code == "already-active"
    recs = raw_records(claim_root, SEAT2.dirname)
    assert [r["state"] for r in recs] == ["reserved", "stopped"]  # type: ignore[index]
    assert recs[1]["proof"]["kind"] == "no-unit"  # type: ignore[index]
    assert recs[1]["proof"]["detail"]["basis"] == "never-spawned"  # type: ignore[index]
    assert recs[1]["spawnMarker"] is False and recs[0]["claimId"] == recs[1]["claimId"]  # type: ignore[index]
    assert recs[0]["claimId"] != won[0]  # type: ignore[index]
    # The winner's chains hold exactly its own reservation.
    for key in (SEAT, SESSION):
        assert [r["claimId"] for r in raw_records(claim_root, key.dirname)] == won  # type: ignore[index]
    assert raw_holders(claim_root, SEAT2, SESSION) == {won[0]}
    assert raw_holders(claim_root, SEAT2, SESSION2) == set()  # the loser's seat key is free again


def test_W1_lost_link_rereads_and_never_overwrites(claim_root: Path) -> None:
    """§2 "Atomic publication" / mutant 3: two contenders publish the same revision number. The one whose
    link() comes second must lose, re-read and refuse; the first one's revision keeps its exact bytes.
    A publication by rename or overwrite would replace it and give the pair two holders."""
    first_store = make_store(claim_root, pid=2000)
    first: list[str] = []

    def first_publishes_meanwhile(b: Barrier) -> None:
        # The second contender has read the free pair and fsynced its temporary file; before its link()
        # the first contender takes the pair completely.
        if b.point == "temp-fsynced" and b.step == "reserve" and not first:
            first.append(first_store.acquire(SEAT, SESSION2, BINDING).claim_id)

    second = make_store(claim_root, pid=2001, barrier=first_publishes_meanwhile)
    with pytest.raises(ClaimRefusal) as e:
        second.acquire(SEAT, SESSION, BINDING)
    seat_bytes = [data for _, data in raw_chain(claim_root, SEAT.dirname)]
    assert e.value.code == "already-active"
    assert len(seat_bytes) == 1
    head = raw_head(claim_root, SEAT.dirname)
    assert head is not None and head[1] is not None and head[1]["claimId"] == first[0]
    assert head[1]["session"]["sessionId"] == SESSION2.session_id
    assert not (claim_root / SESSION.dirname).exists() or raw_chain(claim_root, SESSION.dirname) == []
    assert raw_holders(claim_root, SEAT, SESSION2) == {first[0]}
    # No temporary file is left behind by the loser.
    assert [n for n in os.listdir(claim_root / SEAT.dirname) if n.startswith(".tmp-")] == []


def test_acquire_when_the_seat_head_changes_but_stays_free_retries(claim_root: Path) -> None:
    """A lost link() is re-read and re-decided, not a refusal: when the other writer left the pair free
    again (a whole claim came and went), the contender publishes at the next number."""
    other = make_store(claim_root, pid=2000)
    done: list[str] = []

    def another_claim_comes_and_goes(b: Barrier) -> None:
        if b.point == "temp-fsynced" and b.step == "reserve" and not done:
            done.append(run_lifecycle(other, lambda c, s: None))

    c = make_store(claim_root, pid=2001, barrier=another_claim_comes_and_goes).acquire(SEAT, SESSION, BINDING)
    assert done and c.claim_id != done[0]
    assert c.head("seat").number == 6 and c.head("session").number == 6


@pytest.mark.parametrize("same", [True, False], ids=["same-bytes", "altered"])
def test_W16_a_head_this_store_published_and_then_altered_in_place_is_read_again_and_holds_the_key(
        claim_root: Path, same: bool) -> None:
    """W16 for the store that published the head itself (issue 34: a store no longer decodes a head whose
    bytes are exactly those it published there): its own stopped head, rewritten in place at the same
    number, is decoded and checked again when its bytes differ (altered: unsafe-replacement, nothing
    written), and is its own revision when they are the same bytes (a new file with them: acquisition
    goes on at the next number)."""
    store = make_store(claim_root, pid=2000)
    run_lifecycle(store, lambda c, s: None)  # both chains end stopped at r5, published by this store
    number, good = raw_chain(claim_root, SESSION.dirname)[-1]
    path = claim_root / SESSION.dirname / f"r{number:010d}.json"
    path.unlink()
    write_raw(claim_root, SESSION.dirname, number, good if same else good.replace(b'"revision":5', b'"revision":4'))
    before = tree_bytes(claim_root)
    if same:
        c = store.acquire(SEAT, SESSION, BINDING)
        assert c.head("session").number == number + 1
        return
    with pytest.raises(ClaimRefusal) as e:
        store.acquire(SEAT, SESSION, BINDING)
    assert e.value.code == "unsafe-replacement" and "does not parse" in e.value.message
    assert tree_bytes(claim_root) == before, "a refused acquisition wrote something"


@pytest.mark.parametrize(
    "damage",
    ["empty", "truncated", "not-json", "extra-field", "wrong-number", "other-key", "not-canonical", "directory",
     "symlink", "too-large"],
)
def test_W16_unparseable_highest_revision_holds_the_key_uncertain(claim_root: Path, damage: str) -> None:
    """W16: a highest revision that won't parse holds the key as uncertain; acquisition refuses
    unsafe-replacement, and the older stopped revision is never reused (nothing is published over it).
    Restart classification reports it unreadable and writes nothing either."""
    run_lifecycle(make_store(claim_root, pid=2000), lambda c, s: None)  # both chains end stopped (r5)
    good = raw_chain(claim_root, SESSION.dirname)[-1][1]
    kdir = claim_root / SESSION.dirname
    name = "r0000000006.json"
    if damage == "empty":
        write_raw(claim_root, SESSION.dirname, 6, b"")
    elif damage == "truncated":
        write_raw(claim_root, SESSION.dirname, 6, good[: len(good) // 2])
    elif damage == "not-json":
        write_raw(claim_root, SESSION.dirname, 6, b"\x00\xff garbage")
    elif damage == "extra-field":
        write_raw(claim_root, SESSION.dirname, 6, good.replace(b'{"bindingId"', b'{"extra":1,"bindingId"'))
    elif damage == "wrong-number":
        write_raw(claim_root, SESSION.dirname, 6, good)  # says revision 5 but sits at 6
    elif damage == "other-key":
        write_raw(claim_root, SESSION.dirname, 6, raw_chain(claim_root, SEAT.dirname)[-1][1])
    elif damage == "not-canonical":
        write_raw(claim_root, SESSION.dirname, 6, good.replace(b'"revision":5', b'"revision": 6'))
    elif damage == "directory":
        (kdir / name).mkdir()
    elif damage == "symlink":
        os.symlink(kdir / "r0000000005.json", kdir / name)
    else:
        write_raw(claim_root, SESSION.dirname, 6, b" " * (64 * 1024 + 1))
    refusal = _refused(claim_root, "unsafe-replacement")
    assert "does not parse" in refusal.message
    probe = Probe()
    before = tree_bytes(claim_root)
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, probe)
    assert Outcome.UNREADABLE in report.outcomes and report.published == ()
    assert tree_bytes(claim_root) == before
    assert report.refusal is not None and report.refusal.code == "unsafe-replacement"


def _other_host_root(tmp_path: Path) -> Path:
    """A claim root written on another machine: an active claim on (SEAT, SESSION) and a released one on
    (SEAT2, SESSION2)."""
    src = tmp_path / "other-host"
    src.mkdir()
    store = make_store(src, pid=2000, host=OTHER_MACHINE)
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    c.activate(invocation_id="inv", engine=ProcessRef(4242, 99))
    run_lifecycle(store, lambda c, s: None, seat=SEAT2, session=SESSION2)
    return src


@pytest.mark.parametrize("pair", ["active", "released"])
def test_W17_copied_claim_root_from_another_host_is_foreign_host(tmp_path: Path, pair: str) -> None:
    """W17 / K16: a claim root copied from a fixture "other host" (another machine ID). Acquisition,
    restart and adoption all refuse foreign-host; nothing is written and nothing is promoted, and no
    boot proof, unit or liveness question is asked."""
    copied = tmp_path / "copied"
    shutil.copytree(_other_host_root(tmp_path), copied)
    seat, session = (SEAT, SESSION) if pair == "active" else (SEAT2, SESSION2)
    before = tree_bytes(copied)
    refusal = _refused(copied, "foreign-host", seat=seat, session=session)
    assert OTHER_MACHINE.machine_id in refusal.message
    probe, liveness = Probe(), Liveness()
    store = make_store(copied, pid=3000, host=HOST, liveness=liveness)
    report = store.restart(seat, session, probe)
    assert report.outcomes == (Outcome.FOREIGN_HOST,) and report.published == ()
    assert report.refusal is not None and report.refusal.code == "foreign-host"
    assert probe.boot_questions == [] and probe.unit_questions == [] and liveness.asked == []
    claim_id = raw_head(copied, seat.dirname)[1]["claimId"]  # type: ignore[index]
    with pytest.raises(ClaimRefusal) as e:
        store.adopt(seat, session, claim_id)
    assert e.value.code == "foreign-host"
    assert tree_bytes(copied) == before


def test_pair_held_under_two_claim_ids_refuses_unsafe_replacement(claim_root: Path) -> None:
    """§2 "Pair state": two keys naming different claim IDs are both held; acquisition refuses."""
    make_store(claim_root, pid=2000).acquire(SEAT, SESSION2, BINDING)
    make_store(claim_root, pid=2001).acquire(SEAT2, SESSION, BINDING)
    refusal = _refused(claim_root, "unsafe-replacement")
    assert "different claims" in refusal.message


def test_release_frees_the_pair_and_records_the_proof(claim_root: Path) -> None:
    store = make_store(claim_root, pid=2000)
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    c.activate(invocation_id="inv", engine=ProcessRef(4242, 99))
    c.release(cohort_proof("s"))
    assert c.state is State.STOPPED
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [r["state"] for r in recs] == ["reserved", "reserved", "active", "stopping", "stopped"]  # type: ignore[index]
        assert ProofKind(recs[-1]["proof"]["kind"]) is ProofKind.COHORT  # type: ignore[index]
    assert raw_holders(claim_root, SEAT, SESSION) == set()
