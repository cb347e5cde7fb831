"""Restart classification at the store level (brief §2 "Owner check", "Restart and half-done pairs").

Owners here are fake identities whose liveness the test decides; units and boot proofs come from a
recording probe. A crash is a barrier hook that raises. W5 at every barrier runs with real processes
(SIGKILL) in test_crash_real.py and over every crash prefix in test_crash_prefix.py; W12 with a real
SIGSTOPped owner in test_crash_real.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from claim_helpers import (
    BINDING,
    ENGINE,
    HOST,
    OTHER_BOOT,
    SEAT,
    SEAT2,
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
    run_lifecycle,
    tree_bytes,
)

from mosaic.writer_claim import ClaimRefusal, Outcome, ProofKind, State
from mosaic.writer_claim.store import Barrier


class Crash(BaseException):
    """Raised by a barrier hook: the process 'dies' there, leaving the claim root as it is."""


def _claim_at(root: Path, *, pid: int = 2000, upto: str) -> str:
    """A claim published up to a lifecycle step by an owner (pid) that then 'dies'. From "engine" on, the
    claim records the cohort reference `cohort_ref(claim_id, HOST, "inv-1")`."""
    store = make_store(root, pid=pid)
    c = store.acquire(SEAT, SESSION, BINDING)
    if upto == "reserved":
        return c.claim_id
    c.mark_spawn()
    if upto == "spawn-marker":
        return c.claim_id
    c.record_engine("inv-1", ENGINE, cohort=cohort_ref(c.claim_id, HOST, "inv-1"))
    if upto == "engine":
        return c.claim_id
    c.activate()
    if upto == "active":
        return c.claim_id
    c.begin_stop("stop-1", confirmation="conf-1", phase="term")
    return c.claim_id


def test_W14_crash_after_reservation_no_marker_no_unit_is_stopped_no_unit(claim_root: Path) -> None:
    """W14: no unit and no marker -> stopped with a no-unit observation; the pair is free."""
    claim_id = _claim_at(claim_root, upto="reserved")
    probe = Probe()
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.STOPPED_NO_UNIT,)
    assert report.free and report.refusal is None
    assert probe.unit_questions == [f"cohort-{claim_id}.scope"]
    for key in (SEAT, SESSION):
        _, head = raw_head(claim_root, key.dirname)  # type: ignore[misc]
        assert head["state"] == "stopped" and head["claimId"] == claim_id
        assert head["proof"]["kind"] == "no-unit" and head["proof"]["detail"]["basis"] == "probe"
        assert head["writer"]["role"] == "restart" and head["owner"]["pid"] == 2000
    # Released in reverse order: the session key's stopped revision was published first.
    assert [k for k, _ in report.published] == ["session", "seat"]
    make_store(claim_root, pid=4000).acquire(SEAT, SESSION, BINDING)


@pytest.mark.parametrize("presence", ["present", "unavailable"])
def test_W14_unit_without_marker_is_uncertain(claim_root: Path, presence: str) -> None:
    """A unit of the intended name without a spawn marker (or a probe that cannot tell) never frees."""
    claim_id = _claim_at(claim_root, upto="reserved")
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, Probe(default=presence))
    assert report.outcomes == (Outcome.UNCERTAIN_UNIT,)
    assert raw_holders(claim_root, SEAT, SESSION) == {claim_id}
    assert report.refusal is not None and report.refusal.code == "unsafe-replacement"


@pytest.mark.parametrize("upto", ["spawn-marker", "engine"])
def test_W20_marker_without_unit_stays_uncertain_until_boot_proof(claim_root: Path, upto: str) -> None:
    """W20: a spawn marker and no unit (the scope was collected) -> uncertain; no launch until a boot
    proof. A no-unit observation never frees a pair that has a spawn marker (mutant 29)."""
    claim_id = _claim_at(claim_root, upto=upto)
    probe = Probe(default="absent")
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.UNCERTAIN_SPAWN_MARKER,)
    assert not report.free
    for key in (SEAT, SESSION):
        _, head = raw_head(claim_root, key.dirname)  # type: ignore[misc]
        assert head["state"] == "uncertain" and head["claimId"] == claim_id and head["proof"] is None
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=4000).acquire(SEAT, SESSION, BINDING)
    assert e.value.code == "unsafe-replacement"
    # The same restart again changes nothing; only a boot proof moves it on.
    again = make_store(claim_root, pid=3001).restart(SEAT, SESSION, probe)
    assert again.outcomes == (Outcome.UNCERTAIN_HELD,) and again.published == ()
    rebooted = make_store(claim_root, pid=5000, host=OTHER_BOOT).restart(SEAT, SESSION, Probe())
    assert rebooted.outcomes == (Outcome.STOPPED_BOOT_PROOF,) and rebooted.free


def test_W13_crash_after_spawn_before_active_with_live_unit(claim_root: Path) -> None:
    """W13: the reservation and a live unit -> uncertain, force stop only; no second spawn (acquire
    refuses, so nothing can reserve the pair again)."""
    claim_id = _claim_at(claim_root, upto="engine")
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, Probe(default="present"))
    assert report.outcomes == (Outcome.UNCERTAIN_UNIT,)
    assert raw_holders(claim_root, SEAT, SESSION) == {claim_id}
    before = tree_bytes(claim_root)
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=4000).acquire(SEAT, SESSION, BINDING)
    assert e.value.code == "unsafe-replacement"
    assert tree_bytes(claim_root) == before


def test_W6_orphan_active_claim_with_live_unit_is_uncertain(claim_root: Path) -> None:
    """Same boot, engine or unit alive, controller gone: an orphan, uncertain, force stop only."""
    claim_id = _claim_at(claim_root, upto="active")
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, Probe(default="present"))
    assert report.outcomes == (Outcome.UNCERTAIN_UNIT,)
    records = raw_records(claim_root, SESSION.dirname)
    assert records[-1] is not None and records[-1]["state"] == "uncertain"
    assert records[-1]["engine"] == {"pid": 4242, "startTime": 99} and records[-1]["claimId"] == claim_id
    assert records[-1]["cohort"] == cohort_ref(claim_id, HOST, "inv-1")  # what a force stop needs (§6)


def test_W7_other_boot_same_machine_is_stopped_with_boot_proof(claim_root: Path) -> None:
    """W7: recorded boot differs, same machine ID -> stopped with a boot proof on both keys. No liveness
    or unit question is asked: a pid of another boot names nothing on this one. The probe answers from
    the cohort reference the claim stored (§6 "Boot proof"), which the stopped revisions keep."""
    claim_id = _claim_at(claim_root, upto="active")
    cohort = cohort_ref(claim_id, HOST, "inv-1")
    probe = Probe()
    liveness = Liveness()
    report = make_store(claim_root, pid=3000, host=OTHER_BOOT, liveness=liveness).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.STOPPED_BOOT_PROOF,)
    assert report.free
    assert probe.boot_questions == [claim_id] and probe.unit_questions == [] and liveness.asked == []
    assert probe.boot_revisions[0].cohort == cohort
    for key in (SEAT, SESSION):
        _, head = raw_head(claim_root, key.dirname)  # type: ignore[misc]
        assert head["proof"]["kind"] == "boot-proof" and head["claimId"] == claim_id
        assert head["proof"]["detail"]["basis"] == "cohort" and head["proof"]["detail"]["invocationId"] == "inv-1"
        assert head["host"]["bootId"] == HOST.boot_id  # the claim's own boot stays recorded
        assert head["cohort"] == cohort


def test_W20_W7_a_claim_without_a_cohort_gets_its_boot_proof_from_unit_and_host(claim_root: Path) -> None:
    """A crash after the spawn marker and before the launcher returned: no cohort reference was recorded.
    After a reboot the probe answers from the claim's unit name and host (W20: "no launch until a boot
    proof")."""
    claim_id = _claim_at(claim_root, upto="spawn-marker")
    probe = Probe()
    report = make_store(claim_root, pid=3000, host=OTHER_BOOT).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.STOPPED_BOOT_PROOF,) and report.free
    (asked,) = probe.boot_revisions
    assert asked.cohort is None and asked.unit_name == f"cohort-{claim_id}.scope" and asked.host == HOST
    detail = raw_head(claim_root, SEAT.dirname)[1]["proof"]["detail"]  # type: ignore[index]
    assert detail["basis"] == "unit-name" and detail["recordedBoot"] == HOST.boot_id


def test_W7_boot_proof_unavailable_keeps_the_pair_held(claim_root: Path) -> None:
    claim_id = _claim_at(claim_root, upto="active")
    before = tree_bytes(claim_root)
    report = make_store(claim_root, pid=3000, host=OTHER_BOOT).restart(SEAT, SESSION, Probe(boot_proofs=False))
    assert report.outcomes == (Outcome.BOOT_PROOF_UNAVAILABLE,)
    assert tree_bytes(claim_root) == before
    assert raw_holders(claim_root, SEAT, SESSION) == {claim_id}


@pytest.mark.parametrize("answer", ["alive", "unknown"])
@pytest.mark.parametrize("upto", ["reserved", "spawn-marker", "active", "stopping"])
def test_W12_alive_owner_is_never_reclassified(claim_root: Path, upto: str, answer: str) -> None:
    """W12 / mutant 13: an owner that still exists (or cannot be proven gone) is never repaired,
    reclassified or orphaned. The restart writes nothing and asks the probe nothing."""
    claim_id = _claim_at(claim_root, pid=2000, upto=upto)
    liveness = Liveness(alive={2000}) if answer == "alive" else Liveness(unknown={2000})
    probe = Probe(default="absent")
    before = tree_bytes(claim_root)
    report = make_store(claim_root, pid=3000, liveness=liveness).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.OWNER_ALIVE,)
    assert report.published == ()
    assert tree_bytes(claim_root) == before
    assert probe.unit_questions == [] and probe.boot_questions == []
    assert raw_holders(claim_root, SEAT, SESSION) == {claim_id}
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=3000, liveness=liveness).adopt(SEAT, SESSION, claim_id)
    assert e.value.code == "already-active"
    assert tree_bytes(claim_root) == before


def test_W15_crash_between_the_keys_during_release_is_finished(claim_root: Path) -> None:
    """W15: the session key is stopped, the seat key still stopping: the pair stays held, and restart
    finishes the release under the same claim ID with the same proof."""
    hook = Hook()
    store = make_store(claim_root, pid=2000, barrier=hook)
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    c.activate(invocation_id="inv", engine=ENGINE)
    c.begin_stop("stop-1")

    def crash_between(b: Barrier) -> None:
        if b.point == "between-keys" and b.step == "stopped":
            raise Crash(b.point)

    hook.action = crash_between
    with pytest.raises(Crash):
        c.release(cohort_proof("stop-1"))
    assert raw_head(claim_root, SESSION.dirname)[1]["state"] == "stopped"  # type: ignore[index]
    assert raw_head(claim_root, SEAT.dirname)[1]["state"] == "stopping"  # type: ignore[index]
    assert raw_holders(claim_root, SEAT, SESSION) == {c.claim_id}
    with pytest.raises(ClaimRefusal):
        make_store(claim_root, pid=4000).acquire(SEAT, SESSION, BINDING)
    probe = Probe()
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.RELEASE_COMPLETED,)
    assert report.published == (("seat", 5),)
    seat_head = raw_head(claim_root, SEAT.dirname)[1]  # type: ignore[index]
    assert seat_head["claimId"] == c.claim_id
    assert seat_head["proof"] == raw_head(claim_root, SESSION.dirname)[1]["proof"]  # type: ignore[index]
    assert probe.unit_questions == []
    assert report.free


def test_half_done_stopping_is_finished_and_left_for_the_stop(claim_root: Path) -> None:
    """Keys disagree (seat stopping, session active): the restart continues the unfinished transition
    (stopping on the session key, same stop record) and never assumes the stop happened. A restarted
    controller adopts the claim and reads back, from the claim alone, the stop record and the cohort
    reference it continues the force stop with (§6 "Controller death during force stop", K10, K11)."""
    hook = Hook()
    store = make_store(claim_root, pid=2000, barrier=hook)
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    cohort = cohort_ref(c.claim_id, HOST, "inv")
    c.activate(invocation_id="inv", engine=ENGINE, cohort=cohort)

    def crash_between(b: Barrier) -> None:
        if b.point == "between-keys" and b.step == "stopping":
            raise Crash(b.point)

    hook.action = crash_between
    with pytest.raises(Crash):
        c.begin_stop("stop-7", confirmation="conf-7", phase="term")
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, Probe(default="absent"))
    assert report.outcomes == (Outcome.STOP_IN_PROGRESS,)
    heads = [raw_head(claim_root, k.dirname)[1] for k in (SEAT, SESSION)]  # type: ignore[index]
    assert [h["state"] for h in heads] == ["stopping", "stopping"]
    assert heads[1]["stop"] == {"stopId": "stop-7", "confirmation": "conf-7", "phase": "term"}
    assert [h["cohort"] for h in heads] == [cohort, cohort]
    # The stop is continued by adopting the claim (K10/K11) and releasing it with a cohort proof.
    adopted = make_store(claim_root, pid=3000, liveness=Liveness(alive={3000})).adopt(SEAT, SESSION, c.claim_id)
    assert adopted.claim_id == c.claim_id and adopted.state is State.STOPPING
    assert adopted.cohort == cohort
    assert adopted.head("seat").cohort == adopted.head("session").cohort == cohort
    assert adopted.head("seat").stop == adopted.head("session").stop
    assert adopted.head("session").stop.stop_id == "stop-7"  # type: ignore[union-attr]
    assert adopted.head("seat").invocation_id == "inv" and adopted.head("seat").engine == ENGINE
    adopted.release(cohort_proof("stop-7"))
    assert raw_holders(claim_root, SEAT, SESSION) == set()
    seat_recs = raw_records(claim_root, SEAT.dirname)
    assert [r["reason"] for r in seat_recs] == ["reserve", "spawn-marker", "active", "stopping", "adopt", "stopped"]  # type: ignore[index]
    assert seat_recs[-1]["owner"]["pid"] == 3000  # type: ignore[index]


@pytest.mark.parametrize("step", ["reserve", "spawn-marker", "engine", "active"])
def test_half_done_acquisition_steps_are_classified_under_the_claim(claim_root: Path, step: str) -> None:
    """A crash between the keys of reserve, spawn marker, engine record or active: classified under the
    same claim ID, both keys end in the same state, and what one key recorded (the spawn marker, the
    engine, the cohort reference) counts for the pair and is carried to the other key."""
    hook = Hook()
    store = make_store(claim_root, pid=2000, barrier=hook)

    def crash_between(b: Barrier) -> None:
        if b.point == "between-keys" and b.step == step:
            raise Crash(b.point)

    claim_id = ""
    cohort = None
    if step == "reserve":
        hook.action = crash_between
        with pytest.raises(Crash):
            store.acquire(SEAT, SESSION, BINDING)
    else:
        c = store.acquire(SEAT, SESSION, BINDING)
        claim_id = c.claim_id
        cohort = cohort_ref(claim_id, HOST, "inv")
        if step != "spawn-marker":
            c.mark_spawn()
        hook.action = crash_between
        with pytest.raises(Crash):
            if step == "spawn-marker":
                c.mark_spawn()
            elif step == "engine":
                c.record_engine("inv", ENGINE, cohort=cohort)
            else:
                c.activate(invocation_id="inv", engine=ENGINE, cohort=cohort)
        assert raw_head(claim_root, SESSION.dirname)[1]["cohort"] is None  # type: ignore[index]
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, Probe(default="absent"))
    if step == "reserve":
        assert report.outcomes == (Outcome.STOPPED_NO_UNIT,)
        assert report.published == (("seat", 2),)  # the session key never named this claim
        assert report.free
    else:
        assert report.outcomes == (Outcome.UNCERTAIN_SPAWN_MARKER,)
        heads = [raw_head(claim_root, k.dirname)[1] for k in (SEAT, SESSION)]  # type: ignore[index]
        assert {h["state"] for h in heads} == {"uncertain"}
        assert {h["claimId"] for h in heads} == {claim_id}
        assert all(h["spawnMarker"] for h in heads)
        recorded = None if step == "spawn-marker" else cohort
        assert [h["cohort"] for h in heads] == [recorded, recorded]
        assert [h["invocationId"] for h in heads] == [None if recorded is None else "inv"] * 2


def test_adopt_after_a_half_done_engine_record_carries_what_either_key_knows(claim_root: Path) -> None:
    """A crash between the keys of the engine record leaves both keys reserved, only the seat key knowing
    the engine and the cohort reference. Adopting the claim publishes both keys with what either knows,
    so the adopter (and any later restart) finds the cohort on both (§6, K11)."""
    hook = Hook()
    store = make_store(claim_root, pid=2000, barrier=hook)
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    cohort = cohort_ref(c.claim_id, HOST, "inv")

    def crash_between(b: Barrier) -> None:
        if b.point == "between-keys" and b.step == "engine":
            raise Crash(b.point)

    hook.action = crash_between
    with pytest.raises(Crash):
        c.record_engine("inv", ENGINE, cohort=cohort)
    adopted = make_store(claim_root, pid=3000, liveness=Liveness(alive={3000})).adopt(SEAT, SESSION, c.claim_id)
    for key in ("seat", "session"):
        head = adopted.head(key)  # type: ignore[arg-type]
        assert (head.reason, head.cohort, head.engine, head.invocation_id) == ("adopt", cohort, ENGINE, "inv")
    assert [r["cohort"] for r in raw_records(claim_root, SESSION.dirname)] == [None, None, cohort]  # type: ignore[index]


def test_two_claims_on_one_pair_are_each_resolved_under_their_own_id(claim_root: Path) -> None:
    """A W4 loser that died before its follow-up: it read both keys free, published its reservation on
    its seat key (SEAT2), and the winner took the shared session key before the loser could. The pair
    (SEAT2, SESSION) then names two claim IDs. Each is classified under its own ID: the dead loser's
    reservation is stopped (no-unit), the live winner is never touched, and acquisition still refuses."""
    winner_store = make_store(claim_root, pid=2000)
    won: list[str] = []

    def winner_takes_session_then_loser_dies(b: Barrier) -> None:
        if b.point == "between-keys" and b.step == "reserve":
            won.append(winner_store.acquire(SEAT, SESSION, BINDING).claim_id)
            raise Crash(b.point)

    loser = make_store(claim_root, pid=2001, barrier=winner_takes_session_then_loser_dies)
    with pytest.raises(Crash):
        loser.acquire(SEAT2, SESSION, BINDING)
    loser_rev = raw_head(claim_root, SEAT2.dirname)[1]  # type: ignore[index]
    assert loser_rev["state"] == "reserved" and loser_rev["session"]["sessionId"] == SESSION.session_id
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=4000).acquire(SEAT2, SESSION, BINDING)
    assert e.value.code == "unsafe-replacement"  # two claim IDs on the pair
    probe = Probe()
    report = make_store(claim_root, pid=3000, liveness=Liveness(alive={2000})).restart(SEAT2, SESSION, probe)
    by_claim = {d.claim_id: d.outcome for d in report.decisions}
    assert by_claim == {loser_rev["claimId"]: Outcome.STOPPED_NO_UNIT, won[0]: Outcome.OWNER_ALIVE}
    assert report.published == (("seat", 2),)
    assert report.refusal is not None and report.refusal.code == "already-active"
    assert raw_holders(claim_root, SEAT2, SESSION) == {won[0]}
    assert [r["claimId"] for r in raw_records(claim_root, SESSION.dirname)] == [won[0]]  # type: ignore[index]


def test_restart_on_a_free_pair_writes_nothing(claim_root: Path) -> None:
    probe = Probe()
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.FREE,) and report.published == () and report.free
    run_lifecycle(make_store(claim_root, pid=2000), lambda c, s: None)
    before = tree_bytes(claim_root)
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.FREE,) and tree_bytes(claim_root) == before
    assert probe.unit_questions == [] and probe.boot_questions == []


def test_concurrent_restarts_converge(claim_root: Path) -> None:
    """Two restarting controllers classify the same dead claim at once. One loses each link() race,
    re-reads and re-decides: each key gets exactly one stopped revision, under the claim's ID."""
    claim_id = _claim_at(claim_root, upto="reserved")
    second = make_store(claim_root, pid=3001)
    fired = []

    def interleave(b: Barrier) -> None:
        # The first restarter has read the pair and written its temp file; the second runs to the end.
        if b.point == "temp-fsynced" and not fired:
            fired.append(b)
            second.restart(SEAT, SESSION, Probe())

    first = make_store(claim_root, pid=3000, barrier=interleave)
    report = first.restart(SEAT, SESSION, Probe())
    assert fired
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [r["state"] for r in recs] == ["reserved", "stopped"]  # type: ignore[index]
        assert {r["claimId"] for r in recs} == {claim_id}  # type: ignore[index]
    assert report.free and report.outcomes == (Outcome.FREE,)


def test_proof_kinds_after_restart(claim_root: Path) -> None:
    _claim_at(claim_root, upto="reserved")
    make_store(claim_root, pid=3000).restart(SEAT, SESSION, Probe())
    head = raw_head(claim_root, SEAT.dirname)[1]  # type: ignore[index]
    assert ProofKind(head["proof"]["kind"]) is ProofKind.NO_UNIT
