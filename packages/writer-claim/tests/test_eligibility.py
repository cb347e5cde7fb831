"""Recovery reservations and their single-use eligibility (brief §6 "Recover", CHAT-03; K17, K18).

"Recover publishes a new reserved claim, under a new claim ID, on both keys. The eligibility record names
that claim ... and it is single-use. ... Launching is a separate library call made by a launcher. It
revalidates the record against the claim and the current leaf, consumes it once, and spawns."

Here the claim's part: `acquire(..., eligibility=...)` reserves with the eligibility pending on both keys,
the reserving process never spawns under it, `take_over(..., eligibility=...)` consumes it once (another
process, while the reserving owner may be alive), and restart classification leaves a pending
reservation held until it is taken over or released with a proof. The record file, the leaf and the
incarnation checks are the controller's.

Real processes where a process's life is the point: the reserving owner and the launcher are child
processes, SIGKILLed where they die, and two launchers race on link() as forked processes. Every child is
waited for and, if still running, killed by the pid the test recorded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from claim_helpers import (
    BINDING,
    ENGINE,
    HOST,
    OTHER_BOOT,
    OTHER_MACHINE,
    SEAT,
    SEAT2,
    SESSION,
    SESSION2,
    Liveness,
    Probe,
    cohort_proof,
    cohort_ref,
    completeness_problems,
    make_revision,
    make_store,
    race,
    raw_head,
    raw_holders,
    raw_records,
    read_line,
    tree_bytes,
    write_raw,
    write_revision,
)

from mosaic.writer_claim import (
    Claim,
    ClaimRefusal,
    ClaimStore,
    Outcome,
    ProofRef,
    Revision,
    SeatKey,
    SessionKey,
    State,
)

# The transition rule itself is private; it is checked here directly as well as through the store.
from mosaic.writer_claim.internals import FORMAT, FORMAT_ELIGIBILITY, check_owner_transition, unit_name_for
from mosaic.writer_claim.model import Eligibility
from mosaic.writer_claim.store import Barrier


class Crash(BaseException):
    """Raised by a barrier hook: the process 'dies' there, leaving the claim root as it is."""


_PRELUDE = textwrap.dedent(
    """
    import os, signal, sys
    from mosaic.writer_claim import *
    SEAT = SeatKey("seat-a", "/fixtures/project", "main")
    SESSION = SessionKey("pi", "01a22a58-944f-7072-a9ab-f808835fc6a2")
    BINDING = Binding("binding-1", "pi", "pi-conversation-1", "main", "leaf-1",
                      Pins("0.85.1", "ab" * 32, "sha256:" + "cd" * 32))
    """
)

# The recovering controller: reserves for eligibility argv[2], prints the claim ID, then answers commands.
_RESERVER = _PRELUDE + textwrap.dedent(
    """
    store = ClaimStore(sys.argv[1])
    c = store.acquire(SEAT, SESSION, BINDING, generation=2, eligibility=sys.argv[2])
    print(c.claim_id, flush=True)
    for line in sys.stdin:
        try:
            if line.strip() == "mark-spawn":
                c.mark_spawn()
            elif line.strip() == "release":
                c.release(ProofRef.never_spawned(c.claim_id, "launch refused"))
            print("ok", flush=True)
        except ValueError:
            print("ValueError", flush=True)
        except ClaimRefusal as e:
            print(e.code, flush=True)
    """
)

# The launcher: takes claim argv[2] over with eligibility argv[3]; SIGKILLs itself at barrier argv[4] of
# the take-over (or never, for "none").
_LAUNCHER = _PRELUDE + textwrap.dedent(
    """
    root, claim_id, eligibility, kill_at = sys.argv[1:5]

    def hook(b):
        if b.step == "take-over" and b.point == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    try:
        ClaimStore(root, barrier=hook).take_over(SEAT, SESSION, claim_id, eligibility=eligibility)
        print("taken", flush=True)
    except ClaimRefusal as e:
        print(e.code, flush=True)
    """
)


@contextmanager
def _child(script: str, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, bufsize=0)
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=60)
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()


def _ask(child: subprocess.Popen[bytes], command: str) -> str:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(command.encode() + b"\n")
    return read_line(child.stdout).strip()


def _sigkill(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    assert child.wait(timeout=60) == -signal.SIGKILL


def _eligibilities(root: Path, key: SeatKey | SessionKey) -> list[object]:
    """The `eligibility` of every revision of one key, oldest first (None where a revision has none)."""
    return [None if r is None else r.get("eligibility") for r in raw_records(root, key.dirname)]


def _reserve(root: Path, eligibility: str = "elig-1", *, pid: int = 2000, **kw: Any) -> Claim:
    """A recovery reservation (generation 2) by a fake owner `pid`, the eligibility pending."""
    return make_store(root, pid=pid, **kw).acquire(SEAT, SESSION, BINDING, generation=2, eligibility=eligibility)


# -- reserving -------------------------------------------------------------------------------------------------


def test_acquire_with_an_eligibility_records_it_pending_on_both_keys(claim_root: Path) -> None:
    """The reservation records `Eligibility(id, taken=False)` on both keys (format /3); every later owner
    revision carries it unchanged. A claim reserved without one is written in format /2, with no such
    field."""
    c = _reserve(claim_root, "recover:0001.a-b_c")
    assert c.eligibility == Eligibility("recover:0001.a-b_c", False)
    c.set_generation(3)
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [r["format"] for r in recs] == [FORMAT_ELIGIBILITY] * 2  # type: ignore[index]
        assert _eligibilities(claim_root, key) == [{"id": "recover:0001.a-b_c", "taken": False}] * 2
        assert [r["reason"] for r in recs] == ["reserve", "generation"]  # type: ignore[index]
    assert c.head("seat").eligibility == c.head("session").eligibility == Eligibility("recover:0001.a-b_c", False)
    assert completeness_problems(claim_root) == []  # every revision schema-valid
    plain = make_store(claim_root, pid=2001).acquire(SEAT2, SESSION2, BINDING)
    assert plain.eligibility is None
    for key in (SEAT2, SESSION2):
        (rec,) = raw_records(claim_root, key.dirname)
        assert rec is not None and rec["format"] == FORMAT and "eligibility" not in rec


@pytest.mark.parametrize("bad", ["", "x" * 129, "with space", "a/b", "é", "line\n", "nul\0"])
def test_an_eligibility_id_that_is_not_one_is_refused_before_anything_is_written(claim_root: Path,
                                                                                  bad: str) -> None:
    with pytest.raises(ValueError, match="eligibility"):
        make_store(claim_root).acquire(SEAT, SESSION, BINDING, eligibility=bad)
    assert tree_bytes(claim_root) == {}
    c = _reserve(claim_root, "ok-" + "x" * 125)  # 128 characters is the bound
    before = tree_bytes(claim_root)
    with pytest.raises(ValueError, match="eligibility"):
        make_store(claim_root, pid=2001).take_over(SEAT, SESSION, c.claim_id, eligibility=bad)
    assert tree_bytes(claim_root) == before


def test_mark_spawn_refuses_while_the_eligibility_is_pending(claim_root: Path) -> None:
    """The reserving process never spawns under a pending eligibility: mark_spawn raises before anything
    is published (and so the engine record and active, which need the marker, are out of reach too)."""
    c = _reserve(claim_root)
    before = tree_bytes(claim_root)
    with pytest.raises(ValueError, match="pending"):
        c.mark_spawn()
    with pytest.raises(ValueError):
        c.record_engine("inv", ENGINE)
    with pytest.raises(ValueError):
        c.activate(invocation_id="inv", engine=ENGINE)
    assert tree_bytes(claim_root) == before
    assert c.state is State.RESERVED and not c.spawn_marker


def test_the_eligibility_is_fixed_for_a_claim_but_for_the_take_over() -> None:
    """check_owner_transition: the eligibility never changes, is never dropped or added, and never turns
    from taken back to pending; pending -> taken is the take-over's step alone, and a take-over changes
    nothing else of the lifecycle. A spawn marker under a pending eligibility is never a transition."""
    pending, taken = Eligibility("elig-1", False), Eligibility("elig-1", True)
    prev = make_revision(eligibility=pending)

    def nxt(**changes: object) -> Revision:
        return prev.evolve(number=2, **changes)

    check_owner_transition(prev, nxt(reason="generation", generation=2))
    check_owner_transition(prev, nxt(reason="take-over", eligibility=taken), take_over=True)
    for bad in (nxt(eligibility=taken), nxt(eligibility=None), nxt(eligibility=Eligibility("elig-2", False)),
                nxt(spawn_marker=True)):
        with pytest.raises(ValueError):
            check_owner_transition(prev, bad)
    for bad in (nxt(eligibility=pending), nxt(eligibility=Eligibility("elig-2", True)),
                nxt(eligibility=taken, spawn_marker=True), nxt(eligibility=taken, state=State.ACTIVE)):
        with pytest.raises(ValueError):
            check_owner_transition(prev, bad, take_over=True)
    after = prev.evolve(eligibility=taken)
    with pytest.raises(ValueError):
        check_owner_transition(after, after.evolve(number=2, eligibility=pending))
    with pytest.raises(ValueError):
        check_owner_transition(after, after.evolve(number=2, eligibility=taken), take_over=True)  # only once
    check_owner_transition(after, after.evolve(number=2, spawn_marker=True, reason="spawn-marker"))
    plain = make_revision()
    with pytest.raises(ValueError):
        check_owner_transition(plain, plain.evolve(number=2, eligibility=taken), take_over=True)


# -- taking over --------------------------------------------------------------------------------------------


def test_K17_a_launcher_process_takes_over_while_the_reserving_owner_is_alive(claim_root: Path) -> None:
    """K17 (the launcher's part): the recovering controller (a live child process) reserved the pair; this
    process, the launcher, takes it over without the owner being gone, then spawns, activates, stops and
    releases as the claim's owner. The reserving process can neither spawn nor publish any more."""
    with _child(_RESERVER, str(claim_root), "elig-k17") as reserver:
        assert reserver.stdout is not None
        claim_id = read_line(reserver.stdout).strip()
        launcher = ClaimStore(claim_root)  # this process, this host and boot, /proc liveness
        c = launcher.take_over(SEAT, SESSION, claim_id, eligibility="elig-k17")
        assert reserver.poll() is None  # the reserving owner is alive throughout
        assert (c.claim_id, c.state, c.spawn_marker) == (claim_id, State.RESERVED, False)
        assert c.eligibility == Eligibility("elig-k17", True)
        assert c.head("seat").owner == c.head("session").owner == launcher.owner
        assert c.head("seat").writer.role == "owner" and c.head("seat").reason == "take-over"
        # The reserving process never spawns under the claim, and its handle is stale: the launcher's
        # revisions hold the next numbers, so its release loses the link() and publishes nothing.
        before = tree_bytes(claim_root)
        assert _ask(reserver, "mark-spawn") == "ValueError"
        assert _ask(reserver, "release") == "unsafe-replacement"
        assert tree_bytes(claim_root) == before
        # Both alive: a restart touches nothing (the heads name the launcher as owner).
        report = ClaimStore(claim_root).restart(SEAT, SESSION, Probe())
        assert report.outcomes == (Outcome.OWNER_ALIVE,) and report.published == ()
        c.mark_spawn()
        cohort = cohort_ref(claim_id, launcher.host, "inv-k17")
        c.activate(invocation_id="inv-k17", engine=ENGINE, cohort=cohort)
        c.begin_stop("stop-k17", phase="kill")
        c.release(cohort_proof("stop-k17"))
        reserver_pid = reserver.pid
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [r["reason"] for r in recs] == [  # type: ignore[index]
            "reserve", "take-over", "spawn-marker", "active", "stopping", "stopped"]
        assert [r["owner"]["pid"] for r in recs] == [reserver_pid] + [os.getpid()] * 5  # type: ignore[index]
        assert _eligibilities(claim_root, key) == ([{"id": "elig-k17", "taken": False}]
                                                   + [{"id": "elig-k17", "taken": True}] * 5)
        assert {r["generation"] for r in recs} == {2}  # type: ignore[index]
        assert recs[-1]["cohort"] == cohort  # type: ignore[index]
    assert completeness_problems(claim_root) == []
    assert raw_holders(claim_root, SEAT, SESSION) == set()


def test_K17_a_second_take_over_refuses_eligibility_and_publishes_nothing(claim_root: Path) -> None:
    """Single use: once taken, the same record refuses, from another launcher or the same one, before and
    after the spawn marker. No liveness question is asked: the owner need not be gone."""
    liveness = Liveness(alive={2000})
    c = _reserve(claim_root)
    first = make_store(claim_root, pid=2001, liveness=liveness).take_over(SEAT, SESSION, c.claim_id,
                                                                          eligibility="elig-1")
    before = tree_bytes(claim_root)
    for pid in (2002, 2001):
        with pytest.raises(ClaimRefusal) as e:
            make_store(claim_root, pid=pid, liveness=liveness).take_over(SEAT, SESSION, c.claim_id,
                                                                         eligibility="elig-1")
        assert e.value.code == "eligibility" and e.value.reconcile is False
        assert "already taken" in str(e.value)
    assert tree_bytes(claim_root) == before
    first.mark_spawn()
    before = tree_bytes(claim_root)
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=2002, liveness=liveness).take_over(SEAT, SESSION, c.claim_id,
                                                                      eligibility="elig-1")
    assert e.value.code == "eligibility"
    assert tree_bytes(claim_root) == before
    assert liveness.asked == []


def _take_over_once(root: str, claim_id: str) -> dict[str, object]:
    try:
        c = ClaimStore(root).take_over(SEAT, SESSION, claim_id, eligibility="elig-race")
        return {"took": c.head("session").owner.process.pid}
    except ClaimRefusal as e:
        return {"refused": e.code}


def test_K17_launchers_racing_on_link_exactly_one_takes_the_claim(claim_root: Path) -> None:
    """K17: 8 launcher processes take the same reservation over at once with the one record: exactly one
    gets the claim; every other refuses eligibility (a lost link(), or the record already taken), and
    each key holds exactly the reservation and the winner's take-over."""
    reserved = ClaimStore(claim_root).acquire(SEAT, SESSION, BINDING, eligibility="elig-race")
    results = race(_take_over_once, str(claim_root), reserved.claim_id)
    assert not [r for r in results if "error" in r], results
    winners = [r["took"] for r in results if "took" in r]
    assert len(winners) == 1, results
    assert [r["refused"] for r in results if "refused" in r] == ["eligibility"] * 7
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [(r["reason"], r["owner"]["pid"]) for r in recs] == [  # type: ignore[index]
            ("reserve", os.getpid()), ("take-over", winners[0])]
        assert [n for n in os.listdir(claim_root / key.dirname) if n.startswith(".tmp-")] == []


def test_K17_a_take_over_that_loses_the_link_race_refuses_eligibility(claim_root: Path) -> None:
    """The exact interleaving: the first launcher has read the pair and written its seat revision's
    temporary file when a second launcher takes the claim over entirely. The first one's link() loses:
    it refuses eligibility, publishes nothing, and leaves no temporary file."""
    c = _reserve(claim_root)
    second = make_store(claim_root, pid=2002)
    fired: list[Barrier] = []

    def interleave(b: Barrier) -> None:
        if b.point == "temp-fsynced" and not fired:
            fired.append(b)
            second.take_over(SEAT, SESSION, c.claim_id, eligibility="elig-1")

    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=2001, barrier=interleave).take_over(SEAT, SESSION, c.claim_id,
                                                                       eligibility="elig-1")
    assert fired and e.value.code == "eligibility"
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [(r["reason"], r["owner"]["pid"]) for r in recs] == [("reserve", 2000), ("take-over", 2002)]  # type: ignore[index]
        assert [n for n in os.listdir(claim_root / key.dirname) if n.startswith(".tmp-")] == []


def test_a_take_over_that_loses_the_session_key_refuses_and_leaves_it_half_done(claim_root: Path) -> None:
    """Another writer publishes on the session key between the keys of a take-over: the launcher refuses
    eligibility; the seat key keeps its take-over (the eligibility is consumed, never pending again)."""
    c = _reserve(claim_root)
    head = c.head("session")

    def someone_else_on_the_session_key(b: Barrier) -> None:
        if b.point == "between-keys":
            write_revision(claim_root, head.evolve(number=2, state=State.UNCERTAIN, reason="someone-else"))

    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=2001, barrier=someone_else_on_the_session_key).take_over(
            SEAT, SESSION, c.claim_id, eligibility="elig-1")
    assert e.value.code == "eligibility"
    assert raw_head(claim_root, SEAT.dirname)[1]["reason"] == "take-over"  # type: ignore[index]
    assert raw_head(claim_root, SESSION.dirname)[1]["reason"] == "someone-else"  # type: ignore[index]
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=2002).take_over(SEAT, SESSION, c.claim_id, eligibility="elig-1")
    assert e.value.code == "eligibility"


def _forge_both(root: Path, claim: Claim, **changes: object) -> None:
    for key in ("seat", "session"):
        head = claim.head(key)  # type: ignore[arg-type]
        write_revision(root, head.evolve(number=head.number + 1, reason="forged", **changes))


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("wrong-eligibility", "eligibility"),
        ("wrong-claim", "eligibility"),
        ("no-eligibility", "eligibility"),
        ("free", "eligibility"),
        ("stopping", "eligibility"),
        ("released", "eligibility"),
        ("uncertain", "eligibility"),
        ("spawn-marker", "eligibility"),
        ("taken-on-the-seat-key", "eligibility"),
        ("taken-on-the-session-key", "eligibility"),
        ("another-claim-on-the-session-key", "eligibility"),
        ("foreign-host", "foreign-host"),
        ("other-boot", "unsafe-replacement"),
        ("unreadable", "unsafe-replacement"),
    ],
)
def test_take_over_refusals(claim_root: Path, case: str, code: str) -> None:
    """Anything but the pair reserved by this claim alone, both keys pending under this eligibility ID, no
    spawn marker, refuses eligibility (a wrong ID, not reserved, already taken on either key, a spawn
    marker); a head of another machine refuses foreign-host, of another boot or unreadable
    unsafe-replacement (restart settles those). Nothing is published."""
    claim_id = "claim-" + "0" * 32
    eligibility = "elig-1"
    if case == "no-eligibility":
        claim_id = make_store(claim_root, pid=2000).acquire(SEAT, SESSION, BINDING).claim_id
    elif case == "foreign-host":
        claim_id = _reserve(claim_root, host=OTHER_MACHINE).claim_id
    elif case == "other-boot":
        claim_id = _reserve(claim_root, host=OTHER_BOOT).claim_id
    elif case == "another-claim-on-the-session-key":
        # Another writer's claim at the session key's head (nothing of this package writes that).
        c = _reserve(claim_root)
        claim_id = c.claim_id
        other = "claim-" + "e" * 32
        write_revision(claim_root, c.head("session").evolve(number=2, claim_id=other,
                                                            unit_name=unit_name_for(other), reason="forged"))
    elif case != "free":
        c = _reserve(claim_root)
        claim_id = c.claim_id
        if case == "wrong-eligibility":
            eligibility = "elig-2"
        elif case == "wrong-claim":
            claim_id = "claim-" + "f" * 32
        elif case == "stopping":
            c.begin_stop("stop-1")
        elif case == "released":
            c.release(ProofRef.never_spawned(c.claim_id, "launch refused"))
        elif case == "uncertain":
            c.mark_uncertain()
        elif case == "spawn-marker":
            _forge_both(claim_root, c, spawn_marker=True)  # nothing of this package writes that
        elif case.startswith("taken-on"):
            key = "seat" if "seat" in case else "session"
            head = c.head(key)  # type: ignore[arg-type]
            write_revision(claim_root, head.evolve(number=2, reason="take-over",
                                                   eligibility=Eligibility("elig-1", True)))
        elif case == "unreadable":
            write_raw(claim_root, SEAT.dirname, 2, b"{not json")
    before = tree_bytes(claim_root)
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=3000).take_over(SEAT, SESSION, claim_id, eligibility=eligibility)
    assert e.value.code == code, e.value
    assert tree_bytes(claim_root) == before


# -- restart ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("presence", ["absent", "present", "unavailable"])
def test_K18_reserving_owner_sigkilled_restart_keeps_the_pair_held_eligibility_pending(
        claim_root: Path, presence: str) -> None:
    """K18 (the claim's part): the recovering controller is SIGKILLed after its reservation. A restart on
    this boot (its death proven by /proc) publishes nothing and asks nothing, whatever the unit: the pair
    stays held for the launcher (outcome eligibility-pending; acquire refuses already-active). It stays
    until released with a proof: here an operator adopts it (the owner is gone) and releases it with a
    never-spawned reference, after which the record is spent and the pair free."""
    with _child(_RESERVER, str(claim_root), "elig-k18") as reserver:
        assert reserver.stdout is not None
        claim_id = read_line(reserver.stdout).strip()
        _sigkill(reserver)
    before = tree_bytes(claim_root)
    probe = Probe(default=presence)
    report = ClaimStore(claim_root).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.ELIGIBILITY_PENDING,)
    assert report.published == () and not report.free
    assert report.refusal is not None and report.refusal.code == "already-active"
    assert probe.unit_questions == [] and probe.boot_questions == []
    with pytest.raises(ClaimRefusal) as e:
        ClaimStore(claim_root).acquire(SEAT, SESSION, BINDING)
    assert e.value.code == "already-active"
    assert ClaimStore(claim_root).restart(SEAT, SESSION, probe).published == ()
    assert tree_bytes(claim_root) == before
    operator = ClaimStore(claim_root).adopt(SEAT, SESSION, claim_id)
    assert operator.eligibility == Eligibility("elig-k18", False)  # adopting consumes nothing
    with pytest.raises(ValueError, match="pending"):
        operator.mark_spawn()
    operator.release(ProofRef.never_spawned(claim_id, "launch refused: the leaf moved (K18)"))
    assert raw_holders(claim_root, SEAT, SESSION) == set()
    with pytest.raises(ClaimRefusal) as e:
        ClaimStore(claim_root).take_over(SEAT, SESSION, claim_id, eligibility="elig-k18")
    assert e.value.code == "eligibility"
    ClaimStore(claim_root).acquire(SEAT, SESSION, BINDING)


@pytest.mark.parametrize("presence", ["absent", "present", "unavailable"])
@pytest.mark.parametrize("owner", ["alive", "gone", "unknown"])
def test_eligibility_pending_whoever_is_alive_and_whatever_unit_exists(claim_root: Path, owner: str,
                                                                       presence: str) -> None:
    """On this boot a pending reservation is eligibility-pending: no liveness or unit question, nothing
    published. On another boot the general rule holds: stopped with a boot proof, and the pair is free."""
    c = _reserve(claim_root)
    liveness = Liveness(alive={2000} if owner == "alive" else set(),
                        unknown={2000} if owner == "unknown" else set())
    probe = Probe(default=presence)
    before = tree_bytes(claim_root)
    report = make_store(claim_root, pid=3000, liveness=liveness).restart(SEAT, SESSION, probe)
    assert [(d.claim_id, d.outcome) for d in report.decisions] == [(c.claim_id, Outcome.ELIGIBILITY_PENDING)]
    assert tree_bytes(claim_root) == before
    assert liveness.asked == [] and probe.unit_questions == []
    rebooted = make_store(claim_root, pid=3000, host=OTHER_BOOT, liveness=liveness).restart(SEAT, SESSION, probe)
    assert rebooted.outcomes == (Outcome.STOPPED_BOOT_PROOF,) and rebooted.free


@pytest.mark.parametrize("reserver_fate", ["killed", "alive"])
def test_W14_half_done_take_over_then_restart_is_stopped_no_unit(claim_root: Path, reserver_fate: str) -> None:
    """A launcher process SIGKILLed between the keys of its take-over: the seat key taken, the session key
    still pending. That is no longer eligibility-pending (the record was consumed; it never turns pending
    again, and a second take-over refuses). Once every recorded owner is gone (the reserving controller
    too: while it lives the restart reports owner-alive), the general rule applies: nobody spawned, the
    unit is absent, so stopped with the no-unit observation on both keys (W14), in release order, both
    keys carrying the eligibility as taken. The pair is free."""
    with _child(_RESERVER, str(claim_root), "elig-w14") as reserver:
        assert reserver.stdout is not None
        claim_id = read_line(reserver.stdout).strip()
        if reserver_fate == "killed":
            _sigkill(reserver)
        with _child(_LAUNCHER, str(claim_root), claim_id, "elig-w14", "between-keys") as launcher:
            assert launcher.wait(timeout=60) == -signal.SIGKILL
        assert _eligibilities(claim_root, SEAT)[-1] == {"id": "elig-w14", "taken": True}
        assert _eligibilities(claim_root, SESSION) == [{"id": "elig-w14", "taken": False}]
        with pytest.raises(ClaimRefusal) as e:
            ClaimStore(claim_root).take_over(SEAT, SESSION, claim_id, eligibility="elig-w14")
        assert e.value.code == "eligibility"
        if reserver_fate == "alive":
            before = tree_bytes(claim_root)
            report = ClaimStore(claim_root).restart(SEAT, SESSION, Probe())
            assert report.outcomes == (Outcome.OWNER_ALIVE,) and tree_bytes(claim_root) == before
            _sigkill(reserver)
    probe = Probe(default="absent")
    report = ClaimStore(claim_root).restart(SEAT, SESSION, probe)
    assert report.outcomes == (Outcome.STOPPED_NO_UNIT,) and report.free
    assert report.published == (("session", 2), ("seat", 3))
    assert probe.unit_questions == [f"cohort-{claim_id}.scope"]
    for key in (SEAT, SESSION):
        _, head = raw_head(claim_root, key.dirname)  # type: ignore[misc]
        assert head["state"] == "stopped" and head["proof"]["kind"] == "no-unit"
        assert head["eligibility"] == {"id": "elig-w14", "taken": True}
    ClaimStore(claim_root).acquire(SEAT, SESSION, BINDING)


def test_a_half_done_take_over_with_a_unit_is_uncertain_and_then_adoptable(claim_root: Path) -> None:
    """The same half-done take-over with a unit of the claim's name present: uncertain on both keys (W14:
    a unit without a marker never frees), both keys now agreeing that the eligibility is taken. adopt
    refuses the half-done pair until then (keys disagree), and accepts the settled one."""
    c = _reserve(claim_root)

    def crash_between(b: Barrier) -> None:
        if b.point == "between-keys":
            raise Crash(b.point)

    with pytest.raises(Crash):
        make_store(claim_root, pid=2001, barrier=crash_between).take_over(SEAT, SESSION, c.claim_id,
                                                                          eligibility="elig-1")
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=3000, liveness=Liveness(alive={3000})).adopt(SEAT, SESSION, c.claim_id)
    assert e.value.code == "unsafe-replacement"
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, Probe(default="present"))
    assert report.outcomes == (Outcome.UNCERTAIN_UNIT,)
    for key in (SEAT, SESSION):
        _, head = raw_head(claim_root, key.dirname)  # type: ignore[misc]
        assert head["state"] == "uncertain" and head["eligibility"] == {"id": "elig-1", "taken": True}
    adopted = make_store(claim_root, pid=3000, liveness=Liveness(alive={3000})).adopt(SEAT, SESSION, c.claim_id)
    assert adopted.eligibility == Eligibility("elig-1", True) and adopted.state is State.UNCERTAIN


@pytest.mark.parametrize(("presence", "outcome"), [("absent", Outcome.STOPPED_NO_UNIT),
                                                   ("present", Outcome.UNCERTAIN_UNIT)])
def test_W14_a_taken_claim_whose_taker_died_before_the_spawn_marker(claim_root: Path, presence: str,
                                                                    outcome: Outcome) -> None:
    """The launcher took the claim over and died before the spawn marker; the reserving controller still
    lives, but the heads name only the launcher. The general rules apply: the taker never spawned, so
    with the unit absent the no-unit observation is a proof (W14); a unit present is uncertain."""
    c = _reserve(claim_root, pid=2000)
    make_store(claim_root, pid=2001).take_over(SEAT, SESSION, c.claim_id, eligibility="elig-1")
    liveness = Liveness(alive={2000})
    report = make_store(claim_root, pid=3000, liveness=liveness).restart(SEAT, SESSION, Probe(default=presence))
    assert report.outcomes == (outcome,)
    assert liveness.asked == [2001]
    assert report.free is (outcome is Outcome.STOPPED_NO_UNIT)


def test_K18_release_of_a_pending_reservation_with_a_never_spawned_proof_frees_the_pair(claim_root: Path) -> None:
    """The reserving owner releases its reservation (the launch was refused, K18): stopping, then stopped
    with a never-spawned no-unit reference, both keys carrying the still pending eligibility. The pair is
    free, the record spent (a take-over refuses), and a new claim may take the pair."""
    c = _reserve(claim_root)
    c.release(ProofRef.never_spawned(c.claim_id, "launch refused"))
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [r["state"] for r in recs] == ["reserved", "stopping", "stopped"]  # type: ignore[index]
        assert recs[-1]["proof"]["detail"]["basis"] == "never-spawned"  # type: ignore[index]
        assert _eligibilities(claim_root, key) == [{"id": "elig-1", "taken": False}] * 3
    assert raw_holders(claim_root, SEAT, SESSION) == set()
    report = make_store(claim_root, pid=3000).restart(SEAT, SESSION, Probe())
    assert report.outcomes == (Outcome.FREE,) and report.published == ()
    with pytest.raises(ClaimRefusal) as e:
        make_store(claim_root, pid=2001).take_over(SEAT, SESSION, c.claim_id, eligibility="elig-1")
    assert e.value.code == "eligibility"
    again = make_store(claim_root, pid=2002).acquire(SEAT, SESSION, BINDING)
    assert again.eligibility is None and HOST == again.head("seat").host
