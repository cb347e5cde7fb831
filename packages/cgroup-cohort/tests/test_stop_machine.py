"""The sans-io force-stop core: every path through seeds/003 §6 "Force stop", fed events in exact order."""

from __future__ import annotations

import pytest

from mosaic.cgroup_cohort import CohortRef, StopRequest
from mosaic.cgroup_cohort.reference import Containment
from mosaic.cgroup_cohort.stop import (
    PGROUP_TRANSITIONS,
    STOP_TRANSITIONS,
    UNCERTAIN_REASONS,
    Acknowledged,
    AwaitGrace,
    CheckIdentity,
    Collect,
    Death,
    Enumerate,
    Enumerated,
    Finish,
    Freeze,
    Frozen,
    FrozenRechecked,
    GraceEnded,
    GroupObserved,
    IdentityObserved,
    IdentityUnavailable,
    Kill,
    Killed,
    KillGroup,
    ObservedIdentity,
    ObserveGroup,
    PgroupStopMachine,
    Reaped,
    RecheckFrozen,
    SendTerm,
    StopMachine,
    TermSent,
    Unavailable,
    check_identity,
    machine_for,
)
from mosaic.safe_open import HostIdentity, ProcessRef

M1, M2, M3 = ProcessRef(10, 100), ProcessRef(11, 101), ProcessRef(12, 102)
SIGNALLING = (SendTerm, Freeze, Kill, KillGroup)


def _kill_phase(machine: StopMachine, members: tuple[ProcessRef, ...] = (M1, M2)) -> Finish:
    """Drive a machine that is in the grace phase through a clean kill phase."""
    assert isinstance(machine.feed(GraceEnded(populated=True)), Freeze)
    assert isinstance(machine.feed(Frozen(True)), Enumerate)
    assert isinstance(machine.feed(Enumerated(members, stable=True)), RecheckFrozen)
    assert isinstance(machine.feed(FrozenRechecked(True)), Kill)
    collect = machine.feed(Killed(populated0=True, at=1000.5))
    assert isinstance(collect, Collect) and collect.members == members
    done = machine.feed(Reaped(tuple(Death(m, 1000.6, "reaped", signal=9) for m in members)))
    assert isinstance(done, Finish)
    return done


def _to_grace(machine: StopMachine, identity: ObservedIdentity) -> None:
    assert isinstance(machine.action, CheckIdentity)
    assert isinstance(machine.feed(IdentityObserved(identity)), SendTerm)
    assert isinstance(machine.feed(TermSent((M1, M2, M3))), AwaitGrace)


@pytest.mark.parametrize("kind", ["scope", "direct"])
def test_K1_full_sequence_reaches_stopped_with_complete_membership(kind, ref_factory, identity_factory,
                                                                   request_):
    ref = ref_factory(kind)
    m = StopMachine(ref, request_, grace=1.5)
    _to_grace(m, identity_factory(ref))
    assert m.action == AwaitGrace(1.5)
    done = _kill_phase(m)
    assert done.outcome.state == "stopped" and done.outcome.membership_complete
    assert done.outcome.signalled
    assert m.evidence.phases == ["identity", "term", "grace", "freeze", "enumerate", "recheck", "kill",
                                 "collect", "done"]


def test_K3_sigterm_acknowledged_stays_stopping_until_kill_phase(ref_factory, identity_factory, request_):
    """K3 / mutant 6: an acknowledged SIGTERM never promotes the stop; the kill phase still runs."""
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    _to_grace(m, identity_factory(ref))
    pending = m.action
    for what in ("sigterm-ack", "eof", "agent_settled", "idle", "abort-ack"):
        assert m.feed(Acknowledged(what)) == pending  # type: ignore[arg-type]
        assert m.state == "stopping" and m.outcome is None
    # The cohort still has a TERM-ignoring member: the kill phase runs and only then is it stopped.
    done = _kill_phase(m, (M3,))
    assert done.outcome.state == "stopped"
    assert m.evidence.acknowledgements == ["sigterm-ack", "eof", "agent_settled", "idle", "abort-ack"]


@pytest.mark.parametrize("when", ["before-term", "during-grace", "after-grace"])
def test_K3_acknowledgement_at_any_step_changes_nothing(when, ref_factory, identity_factory, request_):
    ref = ref_factory("direct")
    m = StopMachine(ref, request_)
    if when == "before-term":
        m.feed(Acknowledged("sigterm-ack"))
        assert isinstance(m.action, CheckIdentity)
    _to_grace(m, identity_factory(ref))
    if when == "during-grace":
        assert isinstance(m.feed(Acknowledged("sigterm-ack")), AwaitGrace)
    assert isinstance(m.feed(GraceEnded(populated=False)), Freeze)
    if when == "after-grace":
        assert isinstance(m.feed(Acknowledged("sigterm-ack")), Freeze)
    assert m.state == "stopping"


def test_K3_empty_after_term_still_runs_the_kill_phase(ref_factory, identity_factory, request_):
    """Emptiness is only ever read in the kill phase: TERM alone never stops."""
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    _to_grace(m, identity_factory(ref))
    assert isinstance(m.feed(GraceEnded(populated=False)), Freeze)
    assert m.state == "stopping"
    assert isinstance(m.feed(Frozen(True)), Enumerate)
    m.feed(Enumerated((), stable=True))
    m.feed(FrozenRechecked(True))
    assert isinstance(m.feed(Killed(True, 5.0)), Collect)
    done = m.feed(Reaped(()))
    assert isinstance(done, Finish) and done.outcome.state == "stopped"
    assert m.evidence.members == ()


def test_K14_other_invocation_id_sends_no_signal(ref_factory, identity_factory, request_):
    """K14 / mutant 22: a unit with the recorded name but another invocation ID is never signalled."""
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    other = "22222222222222222222222222222222"
    done = m.feed(IdentityObserved(identity_factory(ref, invocation_id=other, shim_invocation_id=other)))
    assert isinstance(done, Finish)
    assert done.outcome.state == "uncertain" and done.outcome.reason == "identity-mismatch"
    assert not done.outcome.signalled
    assert m.evidence.phases == ["identity", "done"]


def test_K14_shim_reporting_another_invocation_sends_no_signal(ref_factory, identity_factory, request_):
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    done = m.feed(IdentityObserved(identity_factory(ref, shim_invocation_id="3" * 32)))
    assert isinstance(done, Finish) and done.outcome.reason == "identity-mismatch"
    assert not done.outcome.signalled


@pytest.mark.parametrize("field", ["unit_cgroup_id", "shim_unit_cgroup_id", "engine_cgroup_id"])
def test_K14_direct_cgroup_id_mismatch_is_another_epoch(field, ref_factory, identity_factory, request_):
    """On the direct path the epoch is the cgroup id: a recreated cgroup of the same name is another cohort."""
    ref = ref_factory("direct")
    m = StopMachine(ref, request_)
    done = m.feed(IdentityObserved(identity_factory(ref, **{field: 999})))
    assert isinstance(done, Finish)
    assert (done.outcome.state, done.outcome.reason, done.outcome.signalled) == (
        "uncertain", "identity-mismatch", False)


@pytest.mark.parametrize(
    "over",
    [
        {"invocation_id": None},
        {"shim_invocation_id": None},
        {"engine_cgroup_id": None},
        {"shim_unit_cgroup_id": None},
        {"host": None},
    ],
)
def test_K15_unreadable_identity_is_unavailable_and_silent(over, ref_factory, identity_factory, request_):
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    done = m.feed(IdentityObserved(identity_factory(ref, **over)))
    assert isinstance(done, Finish)
    assert done.outcome.reason == "identity-unavailable" and not done.outcome.signalled


@pytest.mark.parametrize("reason", ["shim-gone", "identity-unavailable", "cgroup-unavailable"])
def test_K15_shim_gone_or_cgroup_missing_at_identity_sends_nothing(reason, ref_factory, request_):
    m = StopMachine(ref_factory("scope"), request_)
    done = m.feed(IdentityUnavailable(reason, "x"))
    assert isinstance(done, Finish)
    assert (done.outcome.state, done.outcome.reason, done.outcome.signalled) == ("uncertain", reason, False)


@pytest.mark.parametrize("step", ["term", "grace", "freeze", "enumerate", "recheck", "kill", "collect"])
def test_K15_unavailable_mid_stop_is_never_empty(step, ref_factory, identity_factory, request_):
    """A cgroup that vanishes (or a shim that dies) at any step ends uncertain at once, never stopped."""
    ref = ref_factory("direct")
    m = StopMachine(ref, request_)
    m.feed(IdentityObserved(identity_factory(ref)))
    script = [TermSent((M1,)), GraceEnded(True), Frozen(True), Enumerated((M1,), True), FrozenRechecked(True),
              Killed(True, 1.0)]
    order = ["term", "grace", "freeze", "enumerate", "recheck", "kill", "collect"]
    for ev in script[: order.index(step)]:
        m.feed(ev)
    assert m.phase == step
    done = m.feed(Unavailable("cgroup-unavailable", "engine/ gone"))
    assert isinstance(done, Finish)
    assert done.outcome.state == "uncertain" and done.outcome.reason == "cgroup-unavailable"
    assert not done.outcome.membership_complete


def test_K13_containment_not_held_never_stops(ref_factory, identity_factory, request_):
    """Where the canary escaped, the whole escalation runs but the outcome is uncertain (K1 expects it)."""
    escaped = Containment(False, "none", (("supervisor/cgroup.procs", "MOVED"),))
    ref = ref_factory("direct", containment=escaped)
    m = StopMachine(ref, request_)
    _to_grace(m, identity_factory(ref))
    done = _kill_phase(m)
    assert done.outcome.state == "uncertain" and done.outcome.reason == "containment-not-held"
    assert done.outcome.signalled and not done.outcome.membership_complete


def test_K13_live_shim_without_containment_never_stops(ref_factory, identity_factory, request_):
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    _to_grace(m, identity_factory(ref, containment=None))
    done = _kill_phase(m)
    assert done.outcome.reason == "containment-not-held"


def test_kill_phase_failures_still_kill_but_end_uncertain(ref_factory, identity_factory, request_):
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    _to_grace(m, identity_factory(ref))
    m.feed(GraceEnded(True))
    # frozen 1 never observed: the kill is still written (best effort) but the stop is uncertain.
    assert isinstance(m.feed(Frozen(False, "frozen 0 after 10s")), Kill)
    m.feed(Killed(True, 2.0))
    done = m.feed(Reaped(()))
    assert isinstance(done, Finish)
    assert done.outcome.reason == "freeze-failed" and not done.outcome.membership_complete


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        ([Frozen(True), Enumerated((M1,), True), FrozenRechecked(True), Killed(False, 1.0),
          Reaped((Death(M1, 1.0, "reaped", 9),))], "populated-timeout"),
        ([Frozen(True), Enumerated((M1,), True), FrozenRechecked(True), Killed(False, 1.0, written=False),
          Reaped(())], "kill-failed"),
        ([Frozen(True), Enumerated((M1, M2), True), FrozenRechecked(True), Killed(True, 1.0),
          Reaped((Death(M1, 1.0, "reaped", 9),), survivors=(M2,))], "member-survived"),
        ([Frozen(True), Enumerated((M1, M2), True), FrozenRechecked(True), Killed(True, 1.0),
          Reaped((Death(M1, 1.0, "reaped", 9),))], "enumeration-incomplete"),
    ],
)
def test_each_missing_observation_makes_the_stop_uncertain(events, reason, ref_factory, identity_factory,
                                                           request_):
    ref = ref_factory("direct")
    m = StopMachine(ref, request_)
    _to_grace(m, identity_factory(ref))
    m.feed(GraceEnded(True))
    action = None
    for ev in events:
        action = m.feed(ev)
    assert isinstance(action, Finish)
    assert action.outcome.state == "uncertain" and action.outcome.reason == reason
    assert reason in UNCERTAIN_REASONS


def test_K12_failed_recheck_refreezes_and_reads_the_members_again(ref_factory, identity_factory, request_):
    """frozen 0 after the enumeration (a woken frozen task) or an unstable reading: freeze, read again."""
    ref = ref_factory("direct")
    m = StopMachine(ref, request_, freeze_rounds=3)
    _to_grace(m, identity_factory(ref))
    m.feed(GraceEnded(True))
    m.feed(Frozen(True))
    m.feed(Enumerated((M1,), True))
    assert isinstance(m.feed(FrozenRechecked(False)), Freeze)  # round 2
    m.feed(Frozen(True))
    m.feed(Enumerated((M1, M2), False))
    assert isinstance(m.feed(FrozenRechecked(True)), Freeze)  # round 3: the reading was not stable
    m.feed(Frozen(True))
    m.feed(Enumerated((M1, M2), True))
    assert isinstance(m.feed(FrozenRechecked(True)), Kill)
    m.feed(Killed(True, 1.0))
    done = m.feed(Reaped((Death(M1, 1.0, "reaped", 9), Death(M2, 1.0, "reaped", 9))))
    assert isinstance(done, Finish) and done.outcome.state == "stopped"
    assert m.evidence.members == (M1, M2) and m.evidence.freeze_rounds == 3


@pytest.mark.parametrize(
    ("last", "reason"),
    [((Enumerated((M1,), True), FrozenRechecked(False)), "freeze-failed"),
     ((Enumerated((M1,), False), FrozenRechecked(True)), "enumeration-incomplete")],
)
def test_K12_freeze_rounds_exhausted_is_uncertain_but_still_killed(last, reason, ref_factory,
                                                                  identity_factory, request_):
    ref = ref_factory("scope")
    m = StopMachine(ref, request_, freeze_rounds=2)
    _to_grace(m, identity_factory(ref))
    m.feed(GraceEnded(True))
    for _ in range(2):
        m.feed(Frozen(True))
        action = None
        for ev in last:
            action = m.feed(ev)
    assert isinstance(action, Kill)  # best effort: the cohort is still killed
    m.feed(Killed(True, 1.0))
    done = m.feed(Reaped((Death(M1, 1.0, "reaped", 9),)))
    assert isinstance(done, Finish)
    assert done.outcome.state == "uncertain" and done.outcome.reason == reason


@pytest.mark.parametrize("missing", ["cgroup.freeze", "cgroup.kill"])
def test_missing_kernel_feature_is_uncertain(missing, ref_factory, identity_factory, request_):
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    features = tuple(f for f in ("cgroup.freeze", "cgroup.kill") if f != missing)
    assert isinstance(m.feed(IdentityObserved(identity_factory(ref, features=features))), SendTerm)
    m.feed(TermSent((M1,)))
    action = m.feed(GraceEnded(True))
    while not isinstance(action, Finish):
        action = m.feed({Freeze: Frozen(True), Enumerate: Enumerated((M1,), True),
                         RecheckFrozen: FrozenRechecked(True), Kill: Killed(True, 1.0),
                         Collect: Reaped((Death(M1, 1.0, "reaped", 9),))}[type(action)])
    assert action.outcome.reason == "kernel-feature-missing"
    assert not action.outcome.membership_complete


def test_K10_restart_rechecks_identity_and_reruns_from_term(ref_factory, identity_factory, request_):
    """A machine killed between TERM and kill: the restart starts at the identity check, then TERM."""
    ref = ref_factory("scope")
    first = StopMachine(ref, request_)
    _to_grace(first, identity_factory(ref))
    assert first.phase == "grace"  # the controller dies here
    restarted = StopMachine(ref, request_)
    assert isinstance(restarted.action, CheckIdentity)
    assert restarted.evidence.termed == ()  # nothing carried over as done
    assert isinstance(restarted.feed(IdentityObserved(identity_factory(ref))), SendTerm)
    restarted.feed(TermSent((M3,)))
    done = _kill_phase(restarted, (M3,))
    assert done.outcome.state == "stopped"
    assert restarted.evidence.members == (M3,)


def test_K10_restart_with_unreadable_identity_sends_nothing(ref_factory, request_):
    restarted = StopMachine(ref_factory("direct"), request_)
    done = restarted.feed(IdentityUnavailable("shim-gone", "socket refused"))
    assert isinstance(done, Finish) and not done.outcome.signalled


def test_events_out_of_phase_are_ignored(ref_factory, identity_factory, request_):
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    assert isinstance(m.feed(Killed(True, 1.0)), CheckIdentity)
    assert isinstance(m.feed(Reaped(())), CheckIdentity)
    _to_grace(m, identity_factory(ref))
    assert isinstance(m.feed(Killed(True, 1.0)), AwaitGrace)
    assert m.state == "stopping"


def test_finished_machine_ignores_further_events(ref_factory, request_):
    m = StopMachine(ref_factory("scope"), request_)
    done = m.feed(IdentityUnavailable("shim-gone", "x"))
    assert m.feed(Killed(True, 1.0)) is done


def test_different_boot_or_host_is_a_mismatch_for_force_stop(ref_factory, identity_factory):
    ref = ref_factory("scope")
    other_boot = HostIdentity(ref.host.machine_id, "a" * 32)
    other_host = HostIdentity("b" * 32, ref.host.boot_id)
    assert check_identity(ref, identity_factory(ref, host=other_boot))[0] == "identity-mismatch"
    assert check_identity(ref, identity_factory(ref, host=other_host))[0] == "identity-mismatch"
    assert check_identity(ref, identity_factory(ref)) is None


def test_pgroup_ref_needs_its_own_machine(ref_factory, request_):
    with pytest.raises(ValueError):
        StopMachine(ref_factory("pgroup"), request_)
    with pytest.raises(ValueError):
        PgroupStopMachine(ref_factory("scope"), request_)


def _pgroup_run(ref: CohortRef, request: StopRequest, remaining: tuple[ProcessRef, ...]) -> Finish:
    m = PgroupStopMachine(ref, request, grace=0.5)
    assert isinstance(m.action, CheckIdentity)
    assert isinstance(m.feed(IdentityObserved(ObservedIdentity(ref.host))), SendTerm)
    assert isinstance(m.feed(TermSent((M1,))), AwaitGrace)
    assert isinstance(m.feed(GraceEnded(True)), KillGroup)
    assert isinstance(m.feed(Killed(False, 1.0)), ObserveGroup)
    done = m.feed(GroupObserved(remaining))
    assert isinstance(done, Finish)
    return done


@pytest.mark.parametrize("remaining", [(), (M2,)])
def test_K2_process_group_fallback_never_reaches_stopped(remaining, ref_factory, request_):
    """K2 / mutant 7: even an empty group after SIGKILL is uncertain (a setsid child left the group)."""
    done = _pgroup_run(ref_factory("pgroup"), request_, remaining)
    assert done.outcome.state == "uncertain"
    assert done.outcome.reason == "process-group-fallback"
    assert not done.outcome.membership_complete and done.outcome.signalled


def test_K2_acknowledgement_on_the_fallback_changes_nothing(ref_factory, request_):
    ref = ref_factory("pgroup")
    m = PgroupStopMachine(ref, request_)
    m.feed(IdentityObserved(ObservedIdentity(ref.host)))
    m.feed(TermSent((M1,)))
    assert isinstance(m.feed(Acknowledged("sigterm-ack")), AwaitGrace)
    assert m.state == "stopping"


def test_pgroup_on_another_boot_sends_nothing(ref_factory, request_):
    ref = ref_factory("pgroup")
    m = PgroupStopMachine(ref, request_)
    done = m.feed(IdentityObserved(ObservedIdentity(HostIdentity(ref.host.machine_id, "c" * 32))))
    assert isinstance(done, Finish) and not done.outcome.signalled


def test_stop_evidence_serialises(ref_factory, identity_factory, request_):
    ref = ref_factory("scope")
    m = StopMachine(ref, request_)
    _to_grace(m, identity_factory(ref))
    _kill_phase(m)
    d = m.evidence.to_dict()
    assert d["members"] == [{"pid": 10, "startTime": 100}, {"pid": 11, "startTime": 101}]
    assert d["populated0"] is True and d["failures"] == []




# ------------------------------------------------------------------------------- the transition tables
# One representative event of every type (rule 9 of _stop.py: the tables are data, and this walks them).
EVENT_TYPES = (IdentityObserved, IdentityUnavailable, TermSent, GraceEnded, Frozen, Enumerated,
               FrozenRechecked, Killed, Reaped, GroupObserved, Unavailable, Acknowledged)
STOP_ORDER = ["identity", "term", "grace", "freeze", "enumerate", "recheck", "kill", "collect"]
PGROUP_ORDER = ["identity", "term", "grace", "kill", "observe"]


def _sample(event_type: type, ref: CohortRef, identity_factory):  # type: ignore[no-untyped-def]
    return {
        IdentityObserved: IdentityObserved(identity_factory(ref)),
        IdentityUnavailable: IdentityUnavailable("shim-gone", "socket refused"),
        TermSent: TermSent((M1,)),
        GraceEnded: GraceEnded(True),
        Frozen: Frozen(True),
        Enumerated: Enumerated((M1,), True),
        FrozenRechecked: FrozenRechecked(True),
        Killed: Killed(True, 1.0),
        Reaped: Reaped((Death(M1, 1.0, "reaped", 9),)),
        GroupObserved: GroupObserved(()),
        Unavailable: Unavailable("cgroup-unavailable", "engine/ gone"),
        Acknowledged: Acknowledged("sigterm-ack"),
    }[event_type]


def _machine_at(kind: str, phase: str, ref_factory, identity_factory):  # type: ignore[no-untyped-def]
    """A new machine of ``kind`` driven along the clean path until it is in ``phase``."""
    ref = ref_factory(kind)
    m = machine_for(ref, StopRequest("stop-t", "pi-t", "exec-t", {"confirmation": "c"}))
    order = PGROUP_ORDER if kind == "pgroup" else STOP_ORDER
    path = [IdentityObserved, TermSent, GraceEnded] + (
        [Killed] if kind == "pgroup" else [Frozen, Enumerated, FrozenRechecked, Killed])
    for event_type in path[: order.index(phase)]:
        m.feed(_sample(event_type, ref, identity_factory))
    assert m.phase == phase
    return m


TABLES = [("scope", STOP_TRANSITIONS, STOP_ORDER), ("direct", STOP_TRANSITIONS, STOP_ORDER),
          ("pgroup", PGROUP_TRANSITIONS, PGROUP_ORDER)]


@pytest.mark.parametrize(("kind", "table", "order"), TABLES)
def test_every_row_of_the_table_runs_its_handler(kind, table, order, ref_factory, identity_factory):
    """Each (phase, event type) row calls exactly the handler it names, which moves the machine on (or, for
    an acknowledgement, records it and keeps the pending action: `_stop` rule 3)."""
    assert {phase for phase, _ in table} == set(order)  # every live phase has rows, "done" has none
    for (phase, event_type), handler in table.items():
        m = _machine_at(kind, phase, ref_factory, identity_factory)
        calls: list[object] = []
        real = getattr(m, handler)
        setattr(m, handler, lambda ev, real=real, calls=calls: calls.append(ev) or real(ev))
        pending = m.action
        event = _sample(event_type, m.ref, identity_factory)
        action = m.feed(event)
        assert calls == [event], (phase, event_type, handler)
        if event_type is Acknowledged:
            assert action is pending and m.phase == phase and m.evidence.acknowledgements == ["sigterm-ack"]
        else:
            assert m.phase != phase, (phase, event_type)
            assert action is m.action


@pytest.mark.parametrize(("kind", "table", "order"), TABLES)
def test_an_event_with_no_row_leaves_the_pending_action_unchanged(kind, table, order, ref_factory,
                                                                  identity_factory):
    """`_stop` rule 9: an event that has no row for the current phase changes nothing at all."""
    unmatched = 0
    for phase in order:
        for event_type in EVENT_TYPES:
            if (phase, event_type) in table:
                continue
            m = _machine_at(kind, phase, ref_factory, identity_factory)
            pending, evidence = m.action, m.evidence.to_dict()
            assert m.feed(_sample(event_type, m.ref, identity_factory)) is pending, (phase, event_type)
            assert (m.phase, m.action, m.evidence.to_dict(), m.outcome) == (phase, pending, evidence, None)
            unmatched += 1
    assert unmatched > 0


def test_machine_for_picks_the_machine_of_the_reference(ref_factory, request_):
    for kind, cls in (("scope", StopMachine), ("direct", StopMachine), ("pgroup", PgroupStopMachine)):
        m = machine_for(ref_factory(kind), request_, grace=0.25)
        assert type(m) is cls and m.grace == 0.25 and m.action == CheckIdentity() and m.phase == "identity"


def test_pgroup_with_unreadable_host_is_unavailable_and_silent(ref_factory, request_):
    m = PgroupStopMachine(ref_factory("pgroup"), request_)
    done = m.feed(IdentityObserved(ObservedIdentity(None)))
    assert isinstance(done, Finish)
    assert (done.outcome.reason, done.outcome.signalled) == ("identity-unavailable", False)


# ----------------------------------------------------------------------- force_stop's hooks: on_phase


class _Scripted:
    """A `StopExecutor` that answers each action with the next scripted event, logging what it was asked."""

    def __init__(self, log: list[str], events: list[object]) -> None:
        self.log, self.events = log, list(events)

    def perform(self, action: object) -> object:
        self.log.append(f"perform {type(action).__name__}")
        return self.events.pop(0)

    def close(self) -> None:
        self.log.append("close")


def _clean_run(ref: CohortRef, identity: ObservedIdentity) -> list[object]:
    return [IdentityObserved(identity), TermSent((M1, M2)), GraceEnded(populated=True), Frozen(True),
            Enumerated((M1, M2), stable=True), FrozenRechecked(True), Killed(populated0=True, at=1000.5),
            Reaped(tuple(Death(m, 1000.6, "reaped", signal=9) for m in (M1, M2)))]


@pytest.mark.parametrize("kind", ["scope", "direct"])
def test_force_stop_reports_each_phase_once_before_its_first_action_and_before_on_action(
        kind, ref_factory, identity_factory, request_):
    """The seam a controller publishes phases through (brief §6: each phase is recorded before any signal
    of it): `on_phase` once per phase change, before that phase's first action and before `on_action`."""
    from mosaic.cgroup_cohort import force_stop

    ref = ref_factory(kind)
    log: list[str] = []
    result = force_stop(ref, request_, executor=_Scripted(log, _clean_run(ref, identity_factory(ref))),
                        on_phase=lambda phase: log.append(f"phase {phase}"),
                        on_action=lambda machine, action: log.append(f"action {type(action).__name__}"))
    assert result.outcome.state == "stopped" and result.proof is not None
    assert log == ["phase identity", "action CheckIdentity", "perform CheckIdentity",
                   "phase term", "action SendTerm", "perform SendTerm",
                   "phase grace", "action AwaitGrace", "perform AwaitGrace",
                   "phase freeze", "action Freeze", "perform Freeze",
                   "phase enumerate", "action Enumerate", "perform Enumerate",
                   "phase recheck", "action RecheckFrozen", "perform RecheckFrozen",
                   "phase kill", "action Kill", "perform Kill",
                   "phase collect", "action Collect", "perform Collect", "close"]


def test_force_stop_reports_the_phase_an_on_action_hook_moved_the_machine_to_before_performing_it(
        ref_factory, identity_factory, request_):
    from mosaic.cgroup_cohort import force_stop

    ref = ref_factory("direct")
    identity = identity_factory(ref)
    log: list[str] = []

    def land(machine: StopMachine, action: object) -> None:  # the identity observed from outside
        log.append(f"action {type(action).__name__}")
        if isinstance(action, CheckIdentity):
            machine.feed(IdentityObserved(identity))

    result = force_stop(ref, request_, executor=_Scripted(log, _clean_run(ref, identity)[1:]),
                        on_phase=lambda phase: log.append(f"phase {phase}"), on_action=land)
    assert result.outcome.state == "stopped"
    assert log[:5] == ["phase identity", "action CheckIdentity", "phase term", "action SendTerm", "perform SendTerm"]


def test_a_raise_from_on_phase_closes_the_executor_and_propagates_with_nothing_of_that_phase_performed(
        ref_factory, identity_factory, request_):
    from mosaic.cgroup_cohort import force_stop

    ref = ref_factory("direct")
    log: list[str] = []

    def publish(phase: str) -> None:
        if phase == "term":
            raise OSError(28, "No space left on device")
        log.append(f"phase {phase}")

    with pytest.raises(OSError):
        force_stop(ref, request_, executor=_Scripted(log, _clean_run(ref, identity_factory(ref))), on_phase=publish)
    assert log == ["phase identity", "perform CheckIdentity", "close"]  # no SendTerm: nothing signalled
