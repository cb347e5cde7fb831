"""The decision core on its own (DESIGN principle 1): `classify` and `refusal_for` are pure functions of
the observed heads and the oracle's answers. Hypothesis draws arbitrary pairs of heads, including
half-done, foreign, other-boot, unreadable and two-claim pairs, with or without engine and cohort
records on either key, and arbitrary oracle answers; the rules of §2 must hold for every one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from claim_helpers import (
    BINDING,
    ENGINE,
    HOST,
    OTHER_BOOT,
    OTHER_MACHINE,
    SEAT,
    SESSION,
    cohort_proof,
    cohort_ref,
    fake_process,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.safe_open import HostIdentity
from mosaic.writer_claim import Outcome, ProofKind, ProofRef, Revision, State, UnitObservation
from mosaic.writer_claim.internals import (
    KeyObservation,
    PairObservation,
    Unreadable,
    classify,
    refusal_for,
    unit_name_for,
)
from mosaic.writer_claim.model import Eligibility, Owner, StopInfo, Writer

CLAIMS = ["claim-" + "a" * 32, "claim-" + "b" * 32]
ELIGIBILITY_IDS = {CLAIMS[0]: "recover-a", CLAIMS[1]: "recover-b"}
RESTARTER = Writer(fake_process(9000), "inc-restart", "restart")
NOW = 1767225600.0  # seconds since the epoch: 2026-01-01T00:00:00Z
NOW_ISO = "2026-01-01T00:00:00.000Z"


@dataclass
class Oracle:
    alive: dict[int, bool | None]
    units: dict[str, str]
    boot_proofs: bool
    log: list[tuple[str, object]] = field(default_factory=list)
    boot_revisions: list[Revision] = field(default_factory=list)

    def owner_alive(self, owner: Owner) -> bool | None:
        self.log.append(("alive", owner.process.pid))
        return self.alive.get(owner.process.pid, False)

    def unit(self, unit_name: str) -> UnitObservation:
        self.log.append(("unit", unit_name))
        return UnitObservation(unit_name, self.units.get(unit_name, "absent"))  # type: ignore[arg-type]

    def boot_proof(self, revision: Revision) -> ProofRef | None:
        self.log.append(("boot", revision.claim_id))
        self.boot_revisions.append(revision)
        if not self.boot_proofs:
            return None
        return ProofRef(ProofKind.BOOT, "sha256:" + "b" * 64, {"claimId": revision.claim_id})


@st.composite
def heads(draw: st.DrawFn, key: str) -> KeyObservation:
    dirname = SEAT.dirname if key == "seat" else SESSION.dirname
    kind = draw(st.sampled_from(["empty", "unreadable", "revision", "revision", "revision"]))
    number = draw(st.integers(1, 50))
    if kind == "empty":
        return KeyObservation(key, dirname, 0, None)  # type: ignore[arg-type]
    if kind == "unreadable":
        return KeyObservation(key, dirname, number, Unreadable(number, "damaged"))  # type: ignore[arg-type]
    claim_id = draw(st.sampled_from([CLAIMS[0], CLAIMS[0], CLAIMS[0], CLAIMS[1]]))
    state = draw(st.sampled_from(list(State)))
    marker = draw(st.booleans())
    proof = None
    if state is State.STOPPED:
        proof = draw(st.sampled_from([
            None, cohort_proof(), ProofRef.never_spawned(claim_id, "t"),
            ProofRef(ProofKind.BOOT, "sha256:" + "c" * 64),
        ]))
    host = draw(st.sampled_from([HOST, HOST, HOST, HOST, OTHER_BOOT, OTHER_MACHINE]))
    pid = draw(st.sampled_from([1, 2]))
    owner = Owner(fake_process(pid), f"inc-{pid}")
    # The engine record, and with it (or not) a cohort reference, on this key alone: a half-done pair.
    recorded = marker and draw(st.booleans())
    cohort = cohort_ref(claim_id, host, "inv") if recorded and draw(st.booleans()) else None
    # A recovery reservation's eligibility (one ID per claim), pending or taken on this key alone.
    taken = draw(st.sampled_from([None, None, False, True]))
    eligibility = None if taken is None else Eligibility(ELIGIBILITY_IDS[claim_id], taken)
    rev = Revision(
        key=key, number=number, seat=SEAT, session=SESSION, claim_id=claim_id, state=state,  # type: ignore[arg-type]
        binding=BINDING, host=host, owner=owner, writer=Writer(owner.process, owner.incarnation, "owner"),
        unit_name=unit_name_for(claim_id), spawn_marker=marker, invocation_id="inv" if recorded else None,
        engine=ENGINE if recorded else None, cohort=cohort, generation=1,
        stop=StopInfo("s", None, "p") if state is State.STOPPING else None, proof=proof, reason="x",
        published_at=NOW_ISO, eligibility=eligibility,
    )
    return KeyObservation(key, dirname, number, rev)  # type: ignore[arg-type]


@st.composite
def recovery_pairs(draw: st.DrawFn) -> PairObservation:
    """Pairs around a recovery reservation of CLAIMS[0]: both keys its, mostly reserved and without a spawn
    marker, the eligibility pending or taken on each key (a half-done take-over), either owner (the
    reserving controller, pid 1, or the launcher, pid 2), this boot or another."""
    host = draw(st.sampled_from([HOST, HOST, HOST, OTHER_BOOT]))
    marker = draw(st.sampled_from([False, False, False, True]))
    out = []
    for key in ("seat", "session"):
        state = draw(st.sampled_from([State.RESERVED] * 4 + [State.STOPPING, State.UNCERTAIN, State.STOPPED]))
        taken = draw(st.booleans())
        pid = 2 if taken else draw(st.sampled_from([1, 2]))
        owner = Owner(fake_process(pid), f"inc-{pid}")
        number = draw(st.integers(1, 5))
        rev = Revision(
            key=key, number=number, seat=SEAT, session=SESSION, claim_id=CLAIMS[0], state=state,  # type: ignore[arg-type]
            binding=BINDING, host=host, owner=owner, writer=Writer(owner.process, owner.incarnation, "owner"),
            unit_name=unit_name_for(CLAIMS[0]), spawn_marker=marker, invocation_id=None, engine=None,
            cohort=None, generation=2, stop=StopInfo("s", None, "p") if state is State.STOPPING else None,
            proof=ProofRef.never_spawned(CLAIMS[0], "t") if state is State.STOPPED and not marker else None,
            reason="x", published_at=NOW_ISO, eligibility=Eligibility(ELIGIBILITY_IDS[CLAIMS[0]], taken),
        )
        out.append(KeyObservation(key, rev.dirname, number, rev))  # type: ignore[arg-type]
    return PairObservation(out[0], out[1])


oracles = st.builds(
    Oracle,
    alive=st.fixed_dictionaries({1: st.sampled_from([False, False, True, None]),
                                 2: st.sampled_from([False, False, True, None])}),
    units=st.fixed_dictionaries({unit_name_for(c): st.sampled_from(["absent", "absent", "present", "unavailable"])
                                 for c in CLAIMS}),
    boot_proofs=st.booleans(),
)


def _reserved(key: str, *, cohort: bool, host: HostIdentity = HOST) -> KeyObservation:
    """A reserved head of CLAIMS[0] with the spawn marker, owned by pid 1; with `cohort`, the engine
    record and a cohort reference too."""
    owner = Owner(fake_process(1), "inc-1")
    rev = Revision(
        key=key, number=3, seat=SEAT, session=SESSION, claim_id=CLAIMS[0], state=State.RESERVED,  # type: ignore[arg-type]
        binding=BINDING, host=host, owner=owner, writer=Writer(owner.process, owner.incarnation, "owner"),
        unit_name=unit_name_for(CLAIMS[0]), spawn_marker=True, invocation_id="inv" if cohort else None,
        engine=ENGINE if cohort else None, cohort=cohort_ref(CLAIMS[0], host, "inv") if cohort else None,
        generation=1, stop=None, proof=None, reason="x", published_at=NOW_ISO,
    )
    return KeyObservation(key, rev.dirname, 3, rev)  # type: ignore[arg-type]


@pytest.mark.parametrize("me", [HOST, OTHER_BOOT], ids=["same-boot", "other-boot"])
@pytest.mark.parametrize("recorded_on", ["seat", "session"])
def test_what_either_key_recorded_is_carried_whichever_key_it_is_on(recorded_on: str, me: HostIdentity) -> None:
    """A half-done pair where only one key recorded the engine and the cohort reference (either one):
    the boot-proof question carries the cohort, and every revision published carries it on both keys."""
    pair = PairObservation(_reserved("seat", cohort=recorded_on == "seat"),
                           _reserved("session", cohort=recorded_on == "session"))
    oracle = Oracle(alive={1: False}, units={unit_name_for(CLAIMS[0]): "present"}, boot_proofs=True)
    (decision,) = classify(pair, me=me, writer=RESTARTER, now=NOW, oracle=oracle)
    expected = cohort_ref(CLAIMS[0], HOST, "inv")
    assert decision.outcome is (Outcome.UNCERTAIN_UNIT if me == HOST else Outcome.STOPPED_BOOT_PROOF)
    assert [p.key for p in decision.publications] == (["seat", "session"] if me == HOST else ["session", "seat"])
    for p in decision.publications:
        assert (p.revision.cohort, p.revision.engine, p.revision.invocation_id) == (expected, ENGINE, "inv")
    assert [r.cohort for r in oracle.boot_revisions] == ([] if me == HOST else [expected])


def _after(pair: PairObservation, decisions: tuple) -> PairObservation:  # type: ignore[type-arg]
    obs = {"seat": pair.seat, "session": pair.session}
    for d in decisions:
        for p in d.publications:
            obs[p.key] = KeyObservation(p.key, obs[p.key].dirname, p.revision.number, p.revision)
    return PairObservation(obs["seat"], obs["session"])


@settings(max_examples=300, deadline=None, database=None)
@given(seat=heads("seat"), session=heads("session"), oracle=oracles,
       me=st.sampled_from([HOST, HOST, HOST, OTHER_BOOT]))
def test_classification_rules_hold_for_any_pair(seat: KeyObservation, session: KeyObservation, oracle: Oracle,
                                                me: HostIdentity) -> None:
    _check_classification(PairObservation(seat, session), oracle, me)


@settings(max_examples=200, deadline=None, database=None)
@given(pair=recovery_pairs(), oracle=oracles, me=st.sampled_from([HOST, HOST, OTHER_BOOT]))
def test_classification_rules_hold_for_recovery_pairs(pair: PairObservation, oracle: Oracle,
                                                      me: HostIdentity) -> None:
    """The same rules over pairs drawn around a recovery reservation (the general strategy seldom draws
    two pending reserved keys of one claim)."""
    _check_classification(pair, oracle, me)


def _check_classification(pair: PairObservation, oracle: Oracle, me: HostIdentity) -> None:
    decisions = classify(pair, me=me, writer=RESTARTER, now=NOW, oracle=oracle)
    revs = [o.revision for o in pair.keys() if o.revision is not None]

    # A head from another machine: foreign-host for the whole pair, nothing written, nothing asked (W17, K16).
    if any(r.host.machine_id != me.machine_id for r in revs):
        assert [d.outcome for d in decisions] == [Outcome.FOREIGN_HOST]
        assert decisions[0].publications == () and oracle.log == []
        assert refusal_for(pair, me).code == "foreign-host"  # type: ignore[union-attr]
        return

    asked_alive = {pid: oracle.alive.get(pid, False) for kind, pid in oracle.log if kind == "alive"}
    # A boot proof is asked with what either key of the claim knows: the cohort reference the probe
    # answers from is there if either key recorded it (W7, §6 "Boot proof").
    for asked in oracle.boot_revisions:
        known = [r.cohort for r in revs if r.claim_id == asked.claim_id and r.cohort is not None]
        assert asked.cohort == (known[0] if known else None)
    for d in decisions:
        claim_revs = [r for r in revs if r.claim_id == d.claim_id]
        marker = any(r.spawn_marker for r in claim_revs)
        cohorts: list[Mapping[str, object]] = [r.cohort for r in claim_revs if r.cohort is not None]
        engines = [r.engine for r in claim_revs if r.engine is not None]
        if d.outcome is Outcome.OWNER_ALIVE:
            assert d.publications == ()
        # A recovery reservation waiting for its launcher (both keys this claim's, reserved, no spawn marker,
        # the eligibility pending on both) stays held on this boot with nothing published and nothing asked,
        # whoever is alive and whatever unit exists (§6 "Recover"); on another boot the boot-proof rule holds.
        group = [o for o in pair.keys() if o.revision is not None and o.revision.claim_id == d.claim_id]
        waiting = len(group) == 2 and not marker and all(
            o.effective_state is State.RESERVED and o.revision is not None and o.revision.eligibility is not None
            and not o.revision.eligibility.taken for o in group)
        other_boot = all(o.revision is not None and o.revision.host.boot_id != me.boot_id
                         for o in group if o.held)
        if waiting and not other_boot:
            assert d.outcome is Outcome.ELIGIBILITY_PENDING
        if d.outcome is Outcome.ELIGIBILITY_PENDING:
            assert waiting and not other_boot and d.publications == ()
            if len(decisions) == 1:
                assert oracle.log == []
        eligibilities = [r.eligibility for r in claim_revs if r.eligibility is not None]
        eligibility = None if not eligibilities else Eligibility(eligibilities[0].id,
                                                                 any(e.taken for e in eligibilities))
        for p in d.publications:
            head = pair.get(p.key)
            # Only a key this claim holds (or held and freed, for a finished release) is written, at the
            # next number, under the same claim ID, keeping the claim's fixed fields.
            assert head.revision is not None and head.revision.claim_id == d.claim_id
            assert p.revision.number == head.head_number + 1
            assert (p.revision.binding, p.revision.host, p.revision.owner, p.revision.unit_name) == (
                head.revision.binding, head.revision.host, head.revision.owner, head.revision.unit_name)
            assert p.revision.writer == RESTARTER and head.held
            assert p.revision.published_at == NOW_ISO  # the clock reading, formatted where it is built
            # What either key recorded once is carried, on both keys (a half-done pair forgets nothing).
            assert p.revision.spawn_marker == marker
            assert p.revision.cohort == (cohorts[0] if cohorts else None)
            assert p.revision.engine == (engines[0] if engines else None)
            # The eligibility too, taken once either key shows it taken (a half-done take-over is consumed).
            assert p.revision.eligibility == eligibility
            # stopped carries a proof and nothing else does (§2 "Fields").
            assert (p.revision.proof is not None) == (p.revision.state is State.STOPPED)
            # Never a no-unit stop for a claim with a spawn marker anywhere on the pair (W20, mutant 29).
            if p.revision.proof is not None and p.revision.proof.kind is ProofKind.NO_UNIT:
                assert not marker
            # Same boot: nothing is published unless every recorded owner was proven gone (W12, mutant 13).
            held = [o.revision for o in pair.keys() if o.held and o.revision is not None
                    and o.revision.claim_id == d.claim_id]
            if any(r.host.boot_id == me.boot_id for r in held):
                owners = {r.owner.process.pid for r in held}
                assert all(asked_alive.get(pid) is False for pid in owners), (owners, asked_alive)
        # Stopped frees the session key first; everything else goes seat first.
        keys = [p.key for p in d.publications]
        if d.publications and all(p.revision.state is State.STOPPED for p in d.publications):
            assert keys == sorted(keys, reverse=True)
        else:
            assert keys == sorted(keys)
    # The probe is asked about a unit only after the owner was proven gone.
    for i, (kind, _) in enumerate(oracle.log):
        if kind == "unit":
            assert any(k == "alive" and oracle.alive.get(v, False) is False for k, v in oracle.log[:i])  # type: ignore[call-overload]
    # Classification converges: classifying its own result again publishes nothing.
    again = classify(_after(pair, decisions), me=me, writer=RESTARTER, now=NOW, oracle=oracle)
    assert all(d.publications == () for d in again), again


@settings(max_examples=150, deadline=None, database=None)
@given(seat=heads("seat"), session=heads("session"), me=st.sampled_from([HOST, OTHER_BOOT]))
def test_refusal_for_is_the_pair_rule(seat: KeyObservation, session: KeyObservation, me: HostIdentity) -> None:
    """refusal_for is None exactly when both keys are free and nothing is foreign; otherwise its code
    follows §2: foreign-host, then unsafe-replacement for unreadable or two claims, then by pair state."""
    pair = PairObservation(seat, session)
    refusal = refusal_for(pair, me)
    revs = [o.revision for o in pair.keys() if o.revision is not None]
    if any(r.host.machine_id != me.machine_id for r in revs):
        assert refusal is not None and refusal.code == "foreign-host"
    elif pair.free:
        assert refusal is None
    elif any(isinstance(o.head, Unreadable) for o in pair.keys()) or len(pair.holders) > 1:
        assert refusal is not None and refusal.code == "unsafe-replacement"
    else:
        assert refusal is not None
        assert refusal.code == ("already-active" if pair.state in (State.RESERVED, State.ACTIVE)
                                else "unsafe-replacement")
