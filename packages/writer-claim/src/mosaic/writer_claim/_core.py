"""The decision core: pure functions from observed key chains (and probe answers) to revisions to publish.

No file I/O happens here (DESIGN.md principle 1). The store (`_store`) reads the two chains, calls these
functions, publishes what they return with link(), and on a lost link() re-reads and calls them again.
Every rule cites brief §2 "Writer-claim record (D1)".

Rules this file keeps:

- A key is free when its chain is empty or its head is stopped with a proof reference. Anything else is
  held: a head that does not parse is held as uncertain, and a stopped head without a proof is held as
  uncertain too (it is nothing this package writes, and nothing that may be trusted as free).
- The pair's state is the more conservative of its two keys (uncertain, stopping, active, reserved,
  stopped). Heads naming different claim IDs are both held: each is classified under its own claim ID.
- Owner transitions publish on the seat key, then the session key; freeing (stopped) publishes on the
  session key first, then the seat key (§2: "released in the reverse order").
- Restart classification acts only on a claim whose owner is proven gone, and never starts anything.
- What a claim learns once (the spawn marker, the invocation ID, the engine, the cohort reference) is kept
  in every later revision; where the two keys of a half-done pair disagree, what either key knows counts
  for both.
- A claim reserved for a launcher (an eligibility, §6 "Recover") is spawned under only by the process
  that took it over with that eligibility, once. While the eligibility is pending on both keys, restart
  classification publishes nothing, whoever is alive and whatever unit exists.
- Time is passed in as seconds since the epoch (`now: float`); it only fills the informational
  `publishedAt` of the revisions built here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict

from mosaic.safe_open import HostIdentity, ProcessRef

from ._model import (
    CONSERVATIVE_RANK,
    JSON,
    Binding,
    Eligibility,
    KeyKind,
    Outcome,
    Owner,
    ProofKind,
    ProofRef,
    Revision,
    SeatKey,
    SessionKey,
    State,
    StopInfo,
    UnitObservation,
    Writer,
    more_conservative,
    unit_name_for,
    utc_timestamp,
)
from ._refusal import ClaimRefusal


@dataclass(frozen=True)
class Unreadable:
    """A head revision that exists but does not parse (§2 "Unreadable revision"). `reason` says why."""

    number: int
    reason: str


@dataclass(frozen=True)
class KeyObservation:
    """One key's chain as read: the highest revision number (0 for an empty chain) and that head."""

    key: KeyKind
    dirname: str
    head_number: int
    head: Revision | Unreadable | None

    @property
    def held(self) -> bool:
        """§2: held "when its highest revision is anything other than stopped with a proof reference"."""
        if self.head is None:
            return False
        if isinstance(self.head, Unreadable):
            return True
        return not self.head.is_free

    @property
    def revision(self) -> Revision | None:
        return self.head if isinstance(self.head, Revision) else None

    @property
    def effective_state(self) -> State | None:
        """The state the pair rule ranks: None when free, uncertain for an unreadable head or a stopped
        head with no proof."""
        if not self.held:
            return None
        if isinstance(self.head, Revision) and self.head.state is not State.STOPPED:
            return self.head.state
        return State.UNCERTAIN


@dataclass(frozen=True)
class PairObservation:
    """Both keys of a pair, each read once. The seat key is read first (§2: "A contender reads both keys
    before publishing")."""

    seat: KeyObservation
    session: KeyObservation

    def keys(self) -> tuple[KeyObservation, KeyObservation]:
        return (self.seat, self.session)

    def get(self, key: KeyKind) -> KeyObservation:
        return self.seat if key == "seat" else self.session

    @property
    def free(self) -> bool:
        return not self.seat.held and not self.session.held

    @property
    def state(self) -> State | None:
        """The pair state (§2 "Pair state"), None when both keys are free."""
        states = [s for s in (self.seat.effective_state, self.session.effective_state) if s is not None]
        if not states:
            return None
        out = states[0]
        for s in states[1:]:
            out = more_conservative(out, s)
        return out

    @property
    def holders(self) -> frozenset[str]:
        """The claim IDs holding a key of the pair (an unreadable head holds under no known ID)."""
        return frozenset(o.head.claim_id for o in self.keys() if o.held and isinstance(o.head, Revision))


@dataclass(frozen=True)
class Publication:
    """A revision to publish at `revision.number` in the chain of `revision.key`."""

    revision: Revision

    @property
    def key(self) -> KeyKind:
        return self.revision.key


# -- acquisition -------------------------------------------------------------------------------------------


def _foreign(pair: PairObservation, me: HostIdentity) -> Revision | None:
    for o in pair.keys():
        if o.revision is not None and o.revision.host.machine_id != me.machine_id:
            return o.revision
    return None


def refusal_for(pair: PairObservation, me: HostIdentity) -> ClaimRefusal | None:
    """Why a new claim may not take this pair now, or None when both keys are free.

    In order: a head written on another machine refuses foreign-host (W17; a claim root belongs to one
    host, and a copied one never becomes free here); an unreadable head (W16) or two keys held under
    different claim IDs (§2 "Pair state") refuse unsafe-replacement; then the pair state decides:
    reserved or active refuse already-active (W2), stopping, uncertain or stopped-without-proof refuse
    unsafe-replacement (W3).
    """
    foreign = _foreign(pair, me)
    if foreign is not None:
        return ClaimRefusal(
            "foreign-host",
            f"the {foreign.key} key's revision {foreign.number} was written on machine "
            f"{foreign.host.machine_id}, not this one ({me.machine_id}); nothing is written",
        )
    if pair.free:
        return None
    for o in pair.keys():
        if isinstance(o.head, Unreadable):
            return ClaimRefusal(
                "unsafe-replacement",
                f"the {o.key} key's highest revision {o.head.number} does not parse ({o.head.reason}); "
                "it holds the key as uncertain, and no older revision is reused",
            )
    holders = pair.holders
    if len(holders) > 1:
        return ClaimRefusal(
            "unsafe-replacement",
            f"the two keys are held under different claims ({', '.join(sorted(holders))}); "
            "each must be resolved under its own claim ID",
        )
    state = pair.state
    (claim,) = holders
    if state in (State.RESERVED, State.ACTIVE):
        return ClaimRefusal("already-active", f"the pair is {state} under {claim}")
    return ClaimRefusal("unsafe-replacement", f"the pair is {state} under {claim}, not stopped with a proof")


def key_refusal(obs: KeyObservation, me: HostIdentity) -> ClaimRefusal | None:
    """`refusal_for` for one key alone (the session key re-read after the seat key was published)."""
    empty = KeyObservation("seat" if obs.key == "session" else "session", "", 0, None)
    pair = PairObservation(obs, empty) if obs.key == "seat" else PairObservation(empty, obs)
    return refusal_for(pair, me)


def new_reservation(
    key: KeyKind,
    number: int,
    *,
    seat: SeatKey,
    session: SessionKey,
    claim_id: str,
    binding: Binding,
    host: HostIdentity,
    owner: Owner,
    generation: int,
    now: float,
    eligibility: Eligibility | None = None,
) -> Revision:
    """The first revision of a new claim on one key: reserved, with the intended unit name recorded
    before anything is spawned (§2 "Lifecycle" 1), and the pending eligibility of a recovery reservation
    (§6 "Recover") when given. Raises ValueError for a value the record refuses."""
    if eligibility is not None and eligibility.taken:
        raise ValueError("a reservation's eligibility is pending; only take_over marks it taken")
    return Revision(
        key=key,
        number=number,
        seat=seat,
        session=session,
        claim_id=claim_id,
        state=State.RESERVED,
        binding=binding,
        host=host,
        owner=owner,
        writer=Writer(owner.process, owner.incarnation, "owner"),
        unit_name=unit_name_for(claim_id),
        spawn_marker=False,
        invocation_id=None,
        engine=None,
        cohort=None,
        generation=generation,
        stop=None,
        proof=None,
        reason="reserve",
        published_at=utc_timestamp(now),
        eligibility=eligibility,
    )


# -- owner transitions --------------------------------------------------------------------------------------

# The states an owner may publish after each state (§2 "Lifecycle"). stopped is reached only from
# stopping or uncertain: "Release publishes stopping, then stopped with the proof".
OWNER_TRANSITIONS: dict[State, frozenset[State]] = {
    State.RESERVED: frozenset({State.RESERVED, State.ACTIVE, State.STOPPING, State.UNCERTAIN}),
    State.ACTIVE: frozenset({State.ACTIVE, State.STOPPING, State.UNCERTAIN}),
    State.STOPPING: frozenset({State.STOPPING, State.STOPPED, State.UNCERTAIN}),
    State.UNCERTAIN: frozenset({State.UNCERTAIN, State.STOPPING, State.STOPPED}),
    State.STOPPED: frozenset(),
}


def check_proof(proof: ProofRef | None, *, state: State, spawn_marker: bool, by_restart: bool) -> None:
    """Raise ValueError unless `proof` may go with `state`.

    stopped needs a proof and nothing else carries one. A no-unit observation is valid only when no spawn
    marker was published (§2 "Fields"; W20). A boot proof comes only from restart classification: an
    owner is by definition on the boot it records.
    """
    if state is not State.STOPPED:
        if proof is not None:
            raise ValueError(f"a {state} revision carries no proof")
        return
    if proof is None:
        raise ValueError("stopped needs a proof reference (cohort proof, boot proof or no-unit observation)")
    if proof.kind is ProofKind.NO_UNIT and spawn_marker:
        raise ValueError("a no-unit observation cannot free a claim that published a spawn marker (W20)")
    if proof.kind is ProofKind.BOOT and not by_restart:
        raise ValueError("a boot proof is issued only by restart classification, never by a live owner")


# Fields a claim records once, after the spawn marker, and keeps (§2 "Lifecycle" 2, §6).
_RECORDED_ONCE = ("invocation_id", "engine", "cohort", "engine_uid")


def _eligibility_pending(rev: Revision) -> bool:
    return rev.eligibility is not None and not rev.eligibility.taken


def check_owner_transition(prev: Revision, new: Revision, *, take_over: bool = False) -> None:
    """Raise ValueError unless `new` may follow `prev` in the same chain, published by the claim's owner
    (with `take_over`: by the launcher taking the claim over, `ClaimStore.take_over`).

    The eligibility is fixed for a claim, except for the one step pending -> taken, which only a take-over
    makes (and a take-over makes nothing else: reserved, no spawn marker, before and after). A spawn
    marker is never published while the eligibility is pending (§6 "Recover": only the taker spawns).

    These are programming errors of the caller (the controller), not refusals: the store builds both.
    """
    if take_over:
        if prev.eligibility is None or prev.eligibility.taken or new.eligibility != Eligibility(
                prev.eligibility.id, True):
            raise ValueError("a take-over turns a pending eligibility into the same eligibility, taken")
        if prev.state is not State.RESERVED or new.state is not State.RESERVED or new.spawn_marker:
            raise ValueError("a take-over takes a reserved claim with no spawn marker and changes neither")
    elif new.eligibility != prev.eligibility:
        raise ValueError("the eligibility is fixed for a claim; only take_over marks it taken")
    if new.spawn_marker and _eligibility_pending(new):
        raise ValueError("no spawn marker while the eligibility is pending: only the launcher that takes the "
                         "claim over spawns under it")
    if new.key != prev.key or new.dirname != prev.dirname or new.claim_id != prev.claim_id:
        raise ValueError("a transition stays in its chain and its claim")
    if new.number != prev.number + 1:
        raise ValueError("a transition publishes the next revision number")
    if new.state not in OWNER_TRANSITIONS[prev.state]:
        raise ValueError(f"{prev.state} -> {new.state} is not a lifecycle step")
    if prev.spawn_marker and not new.spawn_marker:
        raise ValueError("a spawn marker, once published, stays")
    if (new.binding, new.host, new.unit_name) != (prev.binding, prev.host, prev.unit_name):
        raise ValueError("binding, host and unit name are fixed for the life of a claim")
    for name in _RECORDED_ONCE:
        # One claim spawns one engine in one scope (§2 "Lifecycle" 2): once recorded, the invocation ID,
        # the engine and the cohort reference are what a restart stops (§6), so no later step changes them.
        before, after = getattr(prev, name), getattr(new, name)
        if before is not None and after != before:
            raise ValueError(f"{name} is recorded once for a claim and never changed or dropped")
        if after is not None and not new.spawn_marker:
            raise ValueError(f"{name} is recorded only after the spawn marker")
    if new.state is State.ACTIVE and (not new.spawn_marker or new.invocation_id is None or new.engine is None):
        raise ValueError("active needs the spawn marker, the invocation ID and the engine identity first")
    check_proof(new.proof, state=new.state, spawn_marker=new.spawn_marker, by_restart=False)


# -- restart classification --------------------------------------------------------------------------------


class Oracle(Protocol):
    """The questions classification may ask. The store answers them from the injected owner-liveness and
    cohort probes; a test can answer them directly and record which were asked."""

    def owner_alive(self, owner: Owner) -> bool | None:
        """True if a process with the owner's pid and start time exists; False only if proven gone;
        None if it cannot be told (another pid namespace, /proc unreadable)."""
        ...

    def unit(self, unit_name: str) -> UnitObservation:
        """Whether the claim's intended unit exists."""
        ...

    def boot_proof(self, revision: Revision) -> ProofRef | None:
        """A boot proof for a claim recorded on another boot of this host, or None if none can be
        issued. `revision` carries what either key of the claim knows (its cohort reference, else its
        unit name and host)."""
        ...


@dataclass(frozen=True)
class GroupDecision:
    """The classification of one claim on the pair (or of an unreadable head, claim_id None)."""

    claim_id: str | None
    outcome: Outcome
    publications: tuple[Publication, ...]


def _ordered(pubs: Iterable[Publication]) -> tuple[Publication, ...]:
    """Seat first for every state but stopped; stopped frees the session key first (§2)."""
    items = list(pubs)
    if items and all(p.revision.state is State.STOPPED for p in items):
        return tuple(sorted(items, key=lambda p: 0 if p.key == "session" else 1))
    return tuple(sorted(items, key=lambda p: 0 if p.key == "seat" else 1))


class Known(TypedDict):
    """What a claim learned once and keeps, as `Revision.evolve` changes."""

    spawn_marker: bool
    invocation_id: str | None
    engine: ProcessRef | None
    cohort: Mapping[str, JSON] | None
    eligibility: Eligibility | None
    engine_uid: int | None


def known_to_either(revs: Sequence[Revision]) -> Known:
    """What any of one claim's revisions recorded, as `Revision.evolve` changes: the spawn marker (sticky
    across the pair), and the engine uid, invocation ID, engine and cohort reference once either key has them. A
    crash between the two keys leaves one key knowing more; the other must not forget it (§2 "Restart
    and half-done pairs"), least of all the cohort a later force stop or boot proof needs (§6).

    The eligibility too: its ID is the claim's, and it is taken once either key shows it taken (a
    take-over that reached one key consumed it; a half-done take-over is never pending again)."""
    eligibility = next((r.eligibility for r in revs if r.eligibility is not None), None)
    if eligibility is not None and any(r.eligibility is not None and r.eligibility.taken for r in revs):
        eligibility = Eligibility(eligibility.id, True)
    return {
        "spawn_marker": any(r.spawn_marker for r in revs),
        "invocation_id": next((r.invocation_id for r in revs if r.invocation_id is not None), None),
        "engine": next((r.engine for r in revs if r.engine is not None), None),
        "cohort": next((r.cohort for r in revs if r.cohort is not None), None),
        "eligibility": eligibility,
        "engine_uid": next((r.engine_uid for r in revs if r.engine_uid is not None), None),
    }


def _follow(
    obs: KeyObservation,
    group: Sequence[KeyObservation],
    *,
    state: State,
    writer: Writer,
    reason: str,
    now: float,
    proof: ProofRef | None = None,
    stop: StopInfo | None = None,
) -> Publication:
    """The next revision on `obs`'s chain for the same claim, carrying what either key knows
    (`known_to_either`) and the stop record."""
    head = obs.revision
    assert head is not None
    revs = [o.revision for o in group if o.revision is not None]
    if stop is None:
        # The stop record (ID, confirmation, phase) is kept: a stop continued after a restart is the same
        # stop (§6 "Controller death during force stop").
        stop = next((r.stop for r in revs if r.stop is not None), None)
    return Publication(
        head.evolve(
            number=obs.head_number + 1,
            state=state,
            writer=writer,
            stop=stop,
            proof=proof,
            reason=reason,
            published_at=utc_timestamp(now),
            **known_to_either(revs),
        )
    )


# Pair states a restart leaves held, finishing only the lagging key: (outcome, the revision's reason).
_FINISH_ON_OTHER_KEY: dict[State, tuple[Outcome, str]] = {
    State.UNCERTAIN: (Outcome.UNCERTAIN_HELD, "restart-finish-uncertain"),
    State.STOPPING: (Outcome.STOP_IN_PROGRESS, "restart-finish-stopping"),
}


def _classify_group(
    claim_id: str,
    group: Sequence[KeyObservation],
    *,
    me: HostIdentity,
    writer: Writer,
    now: float,
    oracle: Oracle,
) -> GroupDecision:
    held = [o for o in group if o.held]
    if not held:
        return GroupDecision(claim_id, Outcome.FREE, ())
    revs = [o.revision for o in group if o.revision is not None]
    marker = any(r.spawn_marker for r in revs)
    ref = max((o for o in held), key=lambda o: CONSERVATIVE_RANK[o.effective_state or State.STOPPED])
    ref_rev = ref.revision
    assert ref_rev is not None

    # Same host, different boot: every process of the recorded boot is gone; the supervisor issues a boot
    # proof and both keys move to stopped (§2 "Restart"; §6 "Boot proof"). No liveness question is asked:
    # a pid from another boot names nothing on this one.
    if all(o.revision is not None and o.revision.host.boot_id != me.boot_id for o in held):
        # The probe answers from the claim's cohort reference, which only one key of a half-done pair may
        # hold: ask with what either key knows.
        proof = oracle.boot_proof(ref_rev.evolve(**known_to_either(revs)))
        if proof is None:
            return GroupDecision(claim_id, Outcome.BOOT_PROOF_UNAVAILABLE, ())
        if proof.kind is not ProofKind.BOOT:
            raise ValueError(f"the probe answered a boot-proof request with a {proof.kind}")
        return GroupDecision(
            claim_id,
            Outcome.STOPPED_BOOT_PROOF,
            _ordered(
                _follow(o, group, state=State.STOPPED, writer=writer, reason="restart-boot-proof", now=now,
                        proof=proof)
                for o in held
            ),
        )

    # A recovery reservation waiting for its launcher (§6 "Recover"): both keys reserved for this claim,
    # no spawn marker, the eligibility pending on both. Nobody can have spawned under it (its owner's
    # mark_spawn refuses; a launcher takes it over first, which makes it taken), and whoever holds the
    # eligibility record may still take it over, so the pair stays held as it is, whether or not the
    # reserving owner lives and whatever unit exists. Only a release with a proof (by its owner, or by an
    # adopter once the owner is gone) or a take-over moves it on; another boot is the boot-proof rule above.
    if len(group) == 2 and not marker and all(
            o.effective_state is State.RESERVED and o.revision is not None and _eligibility_pending(o.revision)
            for o in group):
        return GroupDecision(claim_id, Outcome.ELIGIBILITY_PENDING, ())

    # Owner check (§2): act only if every recorded owner is proven gone. A paused or slow owner that still
    # exists is never repaired, reclassified or orphaned (W12); "cannot tell" is not "gone".
    owners = {o.revision.owner for o in held if o.revision is not None}
    for owner in sorted(owners, key=lambda w: (w.process.pid, w.incarnation)):
        if oracle.owner_alive(owner) is not False:
            return GroupDecision(claim_id, Outcome.OWNER_ALIVE, ())

    # Keys disagree after a release that freed one key: finish the release under the same claim ID with
    # the same proof (W15).
    freed = [o for o in group if not o.held and o.revision is not None]
    for f in freed:
        proof = f.revision.proof if f.revision is not None else None
        if proof is not None and not (proof.kind is ProofKind.NO_UNIT and marker):
            return GroupDecision(
                claim_id,
                Outcome.RELEASE_COMPLETED,
                _ordered(
                    _follow(o, group, state=State.STOPPED, writer=writer, reason="restart-finish-release",
                            now=now, proof=proof)
                    for o in held
                ),
            )

    state = ref.effective_state
    if state in _FINISH_ON_OTHER_KEY:
        # Uncertain: only a force stop (after adopt) or a boot proof moves it on. Stopping: a stop was in
        # progress when the owner died; the stop itself is continued by whoever adopts the claim (§6
        # "Controller death during force stop"), never assumed done. Either way the restart only finishes
        # the unfinished transition on the key that lags.
        outcome, reason = _FINISH_ON_OTHER_KEY[state]
        return GroupDecision(
            claim_id,
            outcome,
            _ordered(
                _follow(o, group, state=state, writer=writer, reason=reason, now=now)
                for o in held
                if o.effective_state is not state
            ),
        )

    # reserved or active, owner gone, same boot: look the intended unit up.
    observation = oracle.unit(ref_rev.unit_name)
    if observation.unit_name != ref_rev.unit_name:
        raise ValueError("the probe answered about another unit")
    if state is State.RESERVED and not marker and observation.presence == "absent":
        # No spawn marker and no unit: nothing was started under that claim (W14).
        proof = observation.no_unit_proof(claim_id, ref_rev.host)
        return GroupDecision(
            claim_id,
            Outcome.STOPPED_NO_UNIT,
            _ordered(
                _follow(o, group, state=State.STOPPED, writer=writer, reason="restart-no-unit", now=now,
                        proof=proof)
                for o in held
            ),
        )
    # A spawn marker (or an active state, which implies one) and no unit: the engine may have run and
    # exited, and a collected scope is an absent observation, not proof (W20). A unit that exists, or a
    # probe that cannot tell, is an orphan: force stop only (W13).
    outcome = Outcome.UNCERTAIN_SPAWN_MARKER if observation.presence == "absent" else Outcome.UNCERTAIN_UNIT
    return GroupDecision(
        claim_id,
        outcome,
        _ordered(
            _follow(o, group, state=State.UNCERTAIN, writer=writer, reason=f"restart-{outcome.value}", now=now)
            for o in held
        ),
    )


def classify(
    pair: PairObservation, *, me: HostIdentity, writer: Writer, now: float, oracle: Oracle
) -> tuple[GroupDecision, ...]:
    """Classify every claim found on the pair (§2 "Owner check", "Restart and half-done pairs").

    Returns one decision per claim ID at a head (and one per unreadable head), each with the revisions to
    publish, in publication order. Nothing here launches anything, and a claim is only ever continued
    under its own claim ID. A head from another machine makes the whole pair foreign-host with nothing
    to publish (a copied claim root never becomes stopped, W17). The oracle is asked only what the rules
    need: no unit or liveness question for a foreign or other-boot claim, no unit question while an
    owner may be alive. `now` is seconds since the epoch, the `publishedAt` of what it returns.

    Raises ValueError when the oracle answers out of turn (a boot-proof request answered with another
    kind of proof, a unit question answered about another unit).
    """
    foreign = _foreign(pair, me)
    if foreign is not None:
        return (GroupDecision(foreign.claim_id, Outcome.FOREIGN_HOST, ()),)
    decisions: list[GroupDecision] = []
    groups: dict[str, list[KeyObservation]] = {}
    for o in pair.keys():
        if isinstance(o.head, Unreadable):
            decisions.append(GroupDecision(None, Outcome.UNREADABLE, ()))
        elif o.revision is not None:
            groups.setdefault(o.revision.claim_id, []).append(o)
    for claim_id, group in groups.items():
        decisions.append(_classify_group(claim_id, group, me=me, writer=writer, now=now, oracle=oracle))
    if not decisions:
        decisions.append(GroupDecision(None, Outcome.FREE, ()))
    return tuple(decisions)


def adopt_refusal(pair: PairObservation, claim_id: str, me: HostIdentity) -> ClaimRefusal | None:
    """Why `claim_id` may not be adopted from this pair (before the owner check), or None.

    Adoption takes over a claim whose owner is proven gone so its stop can be continued (§6 "Controller
    death during force stop"). It needs both heads of the claim readable, on this machine and this boot,
    held, in one state, and no other claim or unreadable head on the pair: anything else is what restart
    classification resolves first.
    """
    if _foreign(pair, me) is not None or any(isinstance(o.head, Unreadable) for o in pair.keys()):
        return refusal_for(pair, me)  # foreign-host or unsafe-replacement, as for a new claim
    mine = [o for o in pair.keys() if o.revision is not None and o.revision.claim_id == claim_id]
    others = pair.holders - {claim_id}
    if others:
        return ClaimRefusal("unsafe-replacement", f"the pair is also held by {', '.join(sorted(others))}")
    if not mine or not any(o.held for o in mine):
        return ClaimRefusal("unsafe-replacement", f"{claim_id} holds no key of this pair")
    states = {o.effective_state for o in mine}
    eligibilities = {o.revision.eligibility for o in mine if o.revision is not None}
    if len(states) != 1 or len(mine) != 2 or None in states or len(eligibilities) != 1:
        # A half-done take-over (the eligibility taken on one key only) is a disagreement too.
        return ClaimRefusal(
            "unsafe-replacement", f"the keys of {claim_id} disagree; restart classification finishes that first"
        )
    if any(o.revision is not None and o.revision.host.boot_id != me.boot_id for o in mine):
        return ClaimRefusal(
            "unsafe-replacement", f"{claim_id} was recorded on another boot; restart classification stops it"
        )
    return None


def take_over_refusal(pair: PairObservation, claim_id: str, eligibility_id: str,
                      me: HostIdentity) -> ClaimRefusal | None:
    """Why a launcher may not take `claim_id` over with eligibility `eligibility_id` now, or None.

    A take-over (§6 "Recover": the launcher "revalidates the record against the claim ..., consumes it
    once, and spawns") needs both heads readable, of this machine (else foreign-host) and this boot
    (else unsafe-replacement, as for adopt: restart classification settles those first). Then the pair
    must be held by `claim_id` alone on both keys, both reserved, no spawn marker on either, and both
    heads carrying `Eligibility(eligibility_id, taken=False)`; anything else (another or no claim, an
    eligibility already taken on either key, another eligibility ID, a claim stopping or stopped, a spawn
    marker) refuses eligibility (K17). The owner's liveness is not asked: the recovering controller that
    reserved the claim may well be alive.
    """
    if _foreign(pair, me) is not None or any(isinstance(o.head, Unreadable) for o in pair.keys()):
        return refusal_for(pair, me)  # foreign-host or unsafe-replacement, as for a new claim
    if any(o.revision is not None and o.revision.host.boot_id != me.boot_id for o in pair.keys()):
        return ClaimRefusal(
            "unsafe-replacement", "a head of the pair was recorded on another boot; restart classification "
                                  "settles it first"
        )
    heads = [o.revision for o in pair.keys()]
    wanted = Eligibility(eligibility_id, False)
    if not all(r is not None and r.claim_id == claim_id for r in heads):
        holders = ", ".join(sorted(pair.holders)) or "no claim"
        return ClaimRefusal("eligibility", f"the pair is not {claim_id} on both keys (held by {holders})")
    revs = [r for r in heads if r is not None]
    if any(r.eligibility is not None and r.eligibility.taken for r in revs):
        return ClaimRefusal("eligibility", f"the eligibility of {claim_id} was already taken")
    if any(r.eligibility != wanted for r in revs):
        return ClaimRefusal("eligibility", f"{claim_id} is not reserved for eligibility {eligibility_id}")
    if any(r.state is not State.RESERVED for r in revs):
        states = sorted({r.state.value for r in revs})
        return ClaimRefusal("eligibility", f"{claim_id} is {'/'.join(states)}, not reserved")
    if any(r.spawn_marker for r in revs):
        return ClaimRefusal("eligibility", f"{claim_id} has a spawn marker")
    return None
