"""A claim this process owns (`Claim`): its lifecycle steps, each published on both keys in the brief's
order (§2 "Lifecycle": the seat key, then the session key; released in the reverse order). `ClaimStore`
makes claims (acquire, adopt, take over) and publishes for them; a claim only decides what its next
revision is. What a claim needs of its store is `ClaimPublisher`, so this module imports nothing of the
store's (the store imports it).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Protocol

from mosaic.safe_open import ProcessRef

from ._codec import encode_revision
from ._core import check_owner_transition, check_proof, known_to_either
from ._disk import RESERVE_MARGIN, RESERVE_REVISIONS
from ._model import (
    JSON,
    MAX_COHORT_BYTES,
    Eligibility,
    KeyKind,
    ProcessIdentity,
    ProofRef,
    Revision,
    SeatKey,
    SessionKey,
    State,
    StopInfo,
    Writer,
    freeze_cohort,
    more_conservative,
    utc_timestamp,
)
from ._refusal import ClaimRefusal

__all__ = ["Claim"]


class ClaimPublisher(Protocol):
    """What a claim uses of the store that made it (a `ClaimStore`): the process and incarnation it writes
    as, its clock, the fork check, the crash-point hook, the publication of one revision and the reserve
    files. The store makes claims; a claim publishes through the store that made it."""

    @property
    def process(self) -> ProcessIdentity: ...

    @property
    def incarnation(self) -> str: ...

    @property
    def _clock(self) -> Callable[[], float]: ...

    def _check_process(self) -> None: ...

    def _hook(self, point: str, step: str, key: str, claim_id: str | None, *, name: str | None = None,
              source: str | None = None, data: bytes | None = None) -> None: ...

    def _publish_one(self, rev: Revision, step: str) -> bool: ...

    def _reserve(self, dirname: str, claim_id: str, size: int, count: int) -> None: ...


class Claim:
    """A claim this process owns: its claim ID, both keys and the last revision it published on each.

    Each method publishes one lifecycle step on the seat key, then the session key; `release` frees the
    session key first, then the seat key (§2). A step whose key already shows it (a retry after an I/O
    error between the keys) is not published twice. Each step links the next revision number after the
    owner's own last one, so a step that finds another writer's revision there refuses
    unsafe-replacement and publishes nothing more.

    Nothing but `release` with a proof frees a claim. Dropping the handle, closing the store, the owner's
    exit or a signal change nothing on disk (§2 "What never releases a claim").
    """

    def __init__(self, store: ClaimPublisher, seat_head: Revision, session_head: Revision) -> None:
        self._store = store
        self._heads: dict[KeyKind, Revision] = {"seat": seat_head, "session": session_head}

    def __repr__(self) -> str:
        return f"Claim({self.claim_id!r}, state={self.state.value!r})"

    @property
    def claim_id(self) -> str:
        return self._heads["seat"].claim_id

    @property
    def unit_name(self) -> str:
        """The intended scope unit name, recorded in the reservation before anything is spawned."""
        return self._heads["seat"].unit_name

    @property
    def seat(self) -> SeatKey:
        return self._heads["seat"].seat

    @property
    def session(self) -> SessionKey:
        return self._heads["seat"].session

    def head(self, key: KeyKind) -> Revision:
        """The last revision this handle published (or adopted) on `key`."""
        return self._heads[key]

    @property
    def state(self) -> State:
        """The pair state by this handle's own revisions (the more conservative of the two keys)."""
        return more_conservative(self._heads["seat"].state, self._heads["session"].state)

    @property
    def spawn_marker(self) -> bool:
        return self._heads["seat"].spawn_marker or self._heads["session"].spawn_marker

    @property
    def cohort(self) -> Mapping[str, JSON] | None:
        """The cohort reference recorded for this claim (read-only), or None while none is recorded."""
        return known_to_either(tuple(self._heads.values()))["cohort"]

    @property
    def eligibility(self) -> Eligibility | None:
        """The eligibility this claim was reserved for (taken once either key shows it taken), or None for
        a claim reserved without one."""
        return known_to_either(tuple(self._heads.values()))["eligibility"]

    def _step(self, step: str, order: tuple[KeyKind, KeyKind], *, reason: str, **changes: object) -> None:
        store = self._store
        store._check_process()
        first = True
        for key in order:
            prev = self._heads[key]
            if all(getattr(prev, f) == v for f, v in changes.items()):
                continue  # already published on this key (a retried step)
            if not first:
                store._hook("between-keys", step, self._heads[order[0]].dirname, self.claim_id)
            first = False
            writer = prev.writer  # this store's owner writer already, unless another wrote the last revision
            if not (writer.process is store.process and writer.incarnation == store.incarnation
                    and writer.role == "owner"):
                writer = Writer(store.process, store.incarnation, "owner")
            new = prev.evolve(number=prev.number + 1, writer=writer, reason=reason,
                              published_at=utc_timestamp(store._clock()), **changes)
            check_owner_transition(prev, new)
            if not store._publish_one(new, step):
                raise ClaimRefusal(
                    "unsafe-replacement",
                    f"another writer published revision {new.number} on the {key} key held by {self.claim_id}",
                )
            self._heads[key] = new

    _FORWARD: tuple[KeyKind, KeyKind] = ("seat", "session")
    _REVERSE: tuple[KeyKind, KeyKind] = ("session", "seat")

    @property
    def engine_uid(self) -> int | None:
        """The uid this claim's engine runs as, when one was allocated for it (recorded with the spawn
        marker), else None."""
        return known_to_either(tuple(self._heads.values()))["engine_uid"]

    def mark_spawn(self, *, engine_uid: int | None = None) -> None:
        """Publish the spawn marker on both keys, still reserved (§2 "Lifecycle" 2), with `engine_uid`, the
        uid allocated for this execution's engine (None: the launcher's one account), which every later
        revision carries. The caller spawns only after this returns; from then on a no-unit observation can
        never free the pair (W20).

        Raises ValueError, before anything is published, unless reserved, and while the claim's
        eligibility is pending: a recovery reservation is spawned under only by the launcher that took it
        over (`ClaimStore.take_over`), never by the process that reserved it (§6 "Recover")."""
        if self.state is not State.RESERVED:
            raise ValueError(f"the spawn marker is published while reserved, not {self.state}")
        if any(h.eligibility is not None and not h.eligibility.taken for h in self._heads.values()):
            raise ValueError(f"the eligibility of {self.claim_id} is pending: only the launcher that takes the "
                             "claim over spawns under it")
        self._step("spawn-marker", self._FORWARD, reason="spawn-marker", state=State.RESERVED, spawn_marker=True,
                   engine_uid=engine_uid)

    def _recorded(self, invocation_id: str | None, engine: ProcessRef | None,
                  cohort: Mapping[str, object] | None) -> dict[str, object]:
        """The engine fields a step publishes: the given ones, else what the claim recorded before. The
        cohort is frozen (and checked) here, before anything is published."""
        head = self._heads["seat"]
        return {
            "invocation_id": invocation_id if invocation_id is not None else head.invocation_id,
            "engine": engine if engine is not None else head.engine,
            "cohort": freeze_cohort(cohort) if cohort is not None else head.cohort,
        }

    def record_engine(self, invocation_id: str, engine: ProcessRef, *,
                      cohort: Mapping[str, object] | None = None) -> None:
        """Record the scope's invocation ID, the engine's identity and, when given, the launcher's cohort
        reference, still reserved (§2 "Lifecycle" 2). From then on every revision of the claim carries
        them.

        The cohort reference is opaque here (cgroup-cohort's `CohortRef.to_dict()`); it must be a JSON
        object of at most MAX_COHORT_BYTES of canonical JSON. Raises ValueError, before anything is
        published, before the spawn marker, for a cohort that is not such an object, or for a value
        that differs from one recorded before (none of the three ever changes for a claim).
        """
        if not self.spawn_marker:
            raise ValueError("an engine is recorded only after the spawn marker")
        self._step("engine", self._FORWARD, reason="engine", **self._recorded(invocation_id, engine, cohort))

    def activate(self, *, invocation_id: str | None = None, engine: ProcessRef | None = None,
                 cohort: Mapping[str, object] | None = None) -> None:
        """Publish active on both keys (§2 "Lifecycle" 3), recording the invocation ID, the engine
        identity and the cohort reference if they were not recorded yet (as `record_engine`).

        Raises ValueError, before anything is published, without the spawn marker, the invocation ID and
        the engine identity, or for values that differ from those recorded (see `record_engine`).
        """
        self._step("active", self._FORWARD, reason="active", state=State.ACTIVE,
                   **self._recorded(invocation_id, engine, cohort))

    def set_generation(self, generation: int) -> None:
        """Record a new controller generation in the current state."""
        self._step("generation", self._FORWARD, reason="generation", generation=generation)

    def begin_stop(self, stop_id: str, *, confirmation: str | None = None, phase: str = "requested") -> None:
        """Publish stopping with the stop record before any signal (§6 "Force stop"). Called again with a
        new phase, it records the phase."""
        self._step("stopping", self._FORWARD, reason="stopping", state=State.STOPPING,
                   stop=StopInfo(stop_id, confirmation, phase))

    def reserve_space(self, revisions: int = RESERVE_REVISIONS) -> int:
        """Preallocate room in each key directory for `revisions` more revisions of this claim, drawn on only
        by the safety path (`RESERVE_STEPS`: recording the spawned engine, uncertain, stopping, stopped, adopt,
        restart) when the file system is full, so a full disk does not stop a stop (module docstring). Each file is as large as any later revision of
        the claim can be: this head's bytes, a cohort reference if none is recorded yet (MAX_COHORT_BYTES)
        and a margin, in whole pages. Idempotent: reserves that exist are kept, so calling it again on an
        adopted claim tops up what a dead owner left.
        Returns the bytes of each file. Raises OSError (ENOSPC: the room is not there); what was made is
        kept, and `release` removes it."""
        head = self._heads["seat"]
        size = len(encode_revision(head)) + RESERVE_MARGIN + (MAX_COHORT_BYTES if head.cohort is None else 0)
        size = -(-size // 4096) * 4096
        for key in self._FORWARD:
            self._store._reserve(self._heads[key].dirname, self.claim_id, size, min(revisions, RESERVE_REVISIONS))
        return size

    def mark_uncertain(self) -> None:
        """Publish uncertain on both keys (an orphan, a failed load check, a stop that could not prove)."""
        self._step("uncertain", self._FORWARD, reason="uncertain", state=State.UNCERTAIN)

    def release(self, proof: ProofRef, *, stop_id: str | None = None) -> None:
        """Release: stopping (unless already stopping) on both keys, then stopped with `proof` on the
        session key, then the seat key (§2 "Lifecycle", "released in the reverse order").

        The proof must allow stopped: a cohort proof, or a no-unit observation when no spawn marker was
        ever published. A no-unit reference after the spawn marker, or a boot proof (restart's alone),
        raises ValueError before anything is published.
        """
        check_proof(proof, state=State.STOPPED, spawn_marker=self.spawn_marker, by_restart=False)
        heads = list(self._heads.values())
        if not all(h.state in (State.STOPPING, State.STOPPED) for h in heads):
            # Keep the stop record of a stop already begun (on one key or both); a retried release after
            # an I/O error between the keys finishes the same stop.
            stop = next((h.stop for h in heads if h.state is State.STOPPING and h.stop is not None), None)
            if stop is None:
                stop = StopInfo(stop_id or f"release-{secrets.token_hex(8)}", None, "release")
            self._step("stopping", self._FORWARD, reason="stopping", state=State.STOPPING, stop=stop)
        self._step("stopped", self._REVERSE, reason="stopped", state=State.STOPPED, proof=proof)
