"""The claim store: the file-system shell around the decision core (`_core`). The claims it makes are
`_claim.Claim`; the file-system steps of a publication, a read and the stop's reserved room are `_disk`'s.

Layout under the claim root (a constructor argument, never a default: brief §2 "Location", DESIGN.md
principle 3), held as a directory fd through safe-open:

    <claim root>/seat-<sha256 of the seat tuple>/r0000000001.json, r0000000002.json, ...
    <claim root>/session-<sha256 of (harness, session id)>/r0000000001.json, ...

Publication (§2 "Atomic publication"), every call relative to the key directory's fd:

    open(.tmp-..., O_CREAT|O_EXCL)  write  fsync(file)  link(.tmp-..., r<n>.json)  fsync(dir)  unlink(.tmp-...)

link() fails with EEXIST when r<n>.json exists, so exactly one writer publishes each revision number, and
a revision name only ever names complete, fsynced bytes. A lost link() means another writer published
first: the store re-reads and re-decides. Nothing is ever renamed over, rewritten or deleted.

Each file-system step is followed by a call of the injected barrier hook with a `Barrier` describing the
step just done, so the W5 crash tests can kill a process exactly there. (The crash-prefix test does not
trust the hook for its operation log: it records the `os` calls themselves.)

A full disk does not stop a stop (brief §6: the stopping revision goes before any signal, and stopped
needs its own). `Claim.reserve_space` preallocates, in each key directory, room for the revisions a stop
needs (`RESERVE_REVISIONS` files named `.reserve-<claim ID>-<k>`, each as large as any later revision of
the claim can be). When the temporary file of a publication on the safety path (`RESERVE_STEPS`: engine,
active, uncertain, stopping, stopped, adopt, restart) cannot be written for want of room (ENOSPC,
EDQUOT), one reserve is renamed to the temporary name and the revision written into its allocated blocks
(then truncated to its length); from there the publication is the same link(), fsync and unlink. Nothing
else draws on the reserve, and a publication that finds room never touches it. A publication that still
cannot be written raises `ClaimWriteError` (an OSError, errno kept), which names the key, the step, the
claim and the revision number. Once a key shows its claim stopped (published by a store that made the
claim's reserves, or by a restart), the claim's reserves there are removed.

Finding a key's head never lists the key directory (README "Finding the head"). A chain is always
numbered 1..n without a gap (each revision is linked at the number after one that exists, and nothing is
ever deleted), so the head is the one n with r<n> present and r<n+1> absent, which existence checks
(lstat) find: from the head this store last saw on that key, one check each for r<h> and r<h+1> when
nothing changed, else galloping forward and bisecting; O(log n) checks for a store's first look at a
key. Nothing new is written for it, so publication and its crash-prefix proof are unchanged. The
directory is listed only when what the checks see contradicts a gap-free chain (r<h> gone, or no r1):
that is damage, and the listing (the highest name present) decides as it always did.
"""

from __future__ import annotations

import errno
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from mosaic.safe_open import HostIdentity, Root, SafeOpenRefusal, current_host, open_root

from ._claim import Claim
from ._core import (
    GroupDecision,
    KeyObservation,
    PairObservation,
    Publication,
    Unreadable,
    adopt_refusal,
    check_owner_transition,
    check_proof,
    classify,
    key_refusal,
    known_to_either,
    new_reservation,
    refusal_for,
    take_over_refusal,
)
from ._disk import (
    Barrier,
    BarrierHook,
    ClaimWriteError,
    LostLink,
    Undecided,
    drop_reserves,
    exists,
    make_reserves,
    publish,
    read_revision,
)
from ._host import ProcLiveness, current_process
from ._model import (
    Binding,
    Eligibility,
    KeyKind,
    Outcome,
    Owner,
    ProcessIdentity,
    ProofRef,
    Revision,
    SeatKey,
    SessionKey,
    State,
    UnitObservation,
    Writer,
    mint_claim_id,
    parse_revision_name,
    utc_timestamp,
)
from ._refusal import ClaimRefusal

# What the public modules show of this module; the rest is the package's own.
__all__ = ["ClaimStore", "CohortProbe", "OwnerLiveness", "PairObservation", "RestartReport"]

# A lost link() is re-read and re-decided. Each loss means another writer made progress, so this bound is
# only a guard against a pathological livelock; past it the call refuses instead of spinning.
MAX_ROUNDS = 64
# Key directories a store holds open at once (`ClaimStore._dir_fd`): a controller's pairs in use, two each.
MAX_HELD_DIRS = 16

class OwnerLiveness(Protocol):
    """The owner check's liveness question (§2 "Owner check"). `ProcLiveness` is the default."""

    def owner_alive(self, owner: Owner) -> bool | None:
        """True if the owner's process (pid and start time) exists, False only when proven gone, None
        when it cannot be told (counted as alive)."""
        ...


class CohortProbe(Protocol):
    """The unit and cohort questions of restart classification. The cgroup-cohort package answers them;
    this package depends on nothing above it.
    """

    def observe_unit(self, unit_name: str) -> UnitObservation:
        """Does a unit with the claim's intended name exist? `absent` only when the probe looked and found
        none; `unavailable` (the probe could not tell) is never `absent` (§6 "Unavailable is not empty")."""
        ...

    def boot_proof(self, revision: Revision, host: HostIdentity) -> ProofRef | None:
        """The boot proof the supervisor issues (§6 "Boot proof") for a claim recorded on another boot of
        this host (`host` is this machine and its current boot), or None when it cannot issue one.

        The probe answers from `revision.cohort`, the launcher's cohort reference, when the claim recorded
        one; else from `revision.unit_name` and `revision.host` (a crash after the spawn marker and before
        the launcher returned, W20). `revision` carries what either key of the claim knows. It is asked
        only for a claim of this machine (a different machine ID is foreign-host, never a boot proof,
        K16); a proof of another kind than `boot-proof` makes the restart raise ValueError.
        """
        ...


@dataclass(frozen=True)
class RestartReport:
    """What `ClaimStore.restart` found and did.

    `decisions` holds one classification per claim found on the pair (the last round's, if a lost link()
    made the store re-read); `published` every revision the restart published, as (key, number); `pair`
    the pair as read afterwards and `refusal` what `acquire` would refuse on it now (None when free).
    """

    decisions: tuple[GroupDecision, ...]
    published: tuple[tuple[KeyKind, int], ...]
    pair: PairObservation
    refusal: ClaimRefusal | None

    @property
    def outcomes(self) -> tuple[Outcome, ...]:
        return tuple(d.outcome for d in self.decisions)

    @property
    def free(self) -> bool:
        return self.pair.free


class _Oracle:
    def __init__(self, liveness: OwnerLiveness, probe: CohortProbe, host: HostIdentity) -> None:
        self._liveness = liveness
        self._probe = probe
        self._host = host

    def owner_alive(self, owner: Owner) -> bool | None:
        return self._liveness.owner_alive(owner)

    def unit(self, unit_name: str) -> UnitObservation:
        return self._probe.observe_unit(unit_name)

    def boot_proof(self, revision: Revision) -> ProofRef | None:
        return self._probe.boot_proof(revision, self._host)


class ClaimStore:
    """The two-key writer claim over one claim root (brief §2 "Writer-claim record (D1)").

    The claim root is required: a path (resolved once by safe-open and held as a directory fd) or an
    already open `mosaic.safe_open.Root` (then the caller keeps ownership of it). Every key directory
    and revision is reached beneath that fd, never by path.

    Identity defaults come from the running kernel and are injectable for tests: `host` (machine ID and
    boot ID, `mosaic.safe_open.current_host()` by default), `process` (pid, start time, pid namespace),
    `incarnation` (this controller incarnation's token; a random one by default), `liveness` (the owner
    check; `ProcLiveness` by default). `barrier` is called after every file-system step (see `Barrier`);
    a hook raising a BaseException that is not an Exception leaves the claim root as a crash at that
    point would (an Exception is handled like an I/O error). `clock` returns seconds since the epoch
    (`time.time` by default); it only fills `publishedAt` (informational, never compared).

    Fails with: SafeOpenRefusal when the claim root (or a key directory in it) is missing, unreadable or
    not a real directory; OSError or ValueError at construction when the host or this process cannot be
    read; ClaimRefusal for the claim's own refusals; OSError for I/O errors, after which the claim root
    holds only complete revisions. A store is not thread-safe, and it belongs to the process that made
    it: a forked child makes its own.
    """

    def __init__(
        self,
        claim_root: str | os.PathLike[str] | Root,
        *,
        host: HostIdentity | None = None,
        process: ProcessIdentity | None = None,
        incarnation: str | None = None,
        liveness: OwnerLiveness | None = None,
        barrier: BarrierHook | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if isinstance(claim_root, Root):
            self._root, self._owns_root = claim_root, False
        else:
            self._root, self._owns_root = open_root(claim_root), True
        self.host = host if host is not None else current_host()
        self._process_injected = process is not None
        self.process = process if process is not None else current_process()
        self.incarnation = incarnation if incarnation is not None else secrets.token_hex(16)
        self.owner = Owner(self.process, self.incarnation)
        self._liveness: OwnerLiveness = liveness if liveness is not None else ProcLiveness()
        self._barrier = barrier
        self._clock: Callable[[], float] = clock if clock is not None else time.time
        # key directory name -> the highest revision number this store has seen exist there: where the
        # next head lookup starts (verified before use, never trusted).
        self._seen: dict[str, int] = {}
        # key directory name -> (number, bytes, revision) of the last revision this store published there:
        # a head read back with exactly those bytes is that revision, not decoded again (`read_revision`).
        self._published: dict[str, tuple[int, bytes, Revision]] = {}
        # Claims this store made reserves for (`Claim.reserve_space`): their reserves are removed when they
        # stop. A restart's stopped revision removes a dead owner's too; no other step looks for any.
        self._reserved: set[str] = set()
        # key directory name -> (fd, device, inode) of the key directories this store holds open, at most
        # MAX_HELD_DIRS, the oldest closed first (`_dir_fd`).
        self._held: dict[str, tuple[int, int, int]] = {}

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def root(self) -> Root:
        return self._root

    def close(self) -> None:
        """Close the claim root if this store opened it. A claim is never changed by closing (§2 "What never
        releases a claim": disconnect). The key directories it holds open are closed too."""
        held, self._held = self._held, {}
        for fd, _, _ in held.values():
            os.close(fd)
        if self._owns_root:
            self._root.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _check_process(self) -> None:
        if not self._process_injected and os.getpid() != self.process.pid:
            raise RuntimeError("a ClaimStore belongs to the process that made it; make a new one after fork")

    def _hook(self, point: str, step: str, key: str, claim_id: str | None, *, name: str | None = None,
              source: str | None = None, data: bytes | None = None) -> None:
        if self._barrier is not None:
            self._barrier(Barrier(point, step, key, claim_id, name, source, data))

    # -- reading -----------------------------------------------------------------------------------------

    def _open_key_dir(self, dirname: str, *, create: bool, claim_id: str | None, step: str) -> int | None:
        """A new fd on the key directory, or None when it does not exist and `create` is false."""
        try:
            return self._root.open_dir(dirname)
        except SafeOpenRefusal as e:
            if e.code != "unavailable":
                raise
            if not create:
                return None
        try:
            os.mkdir(dirname, 0o700, dir_fd=self._root.fd)
        except FileExistsError:
            pass  # another writer made it between the lookup and the mkdir
        else:
            # The new directory's entry must be durable before any revision in it counts.
            self._hook("key-dir-created", step, dirname, claim_id, name=dirname)
            os.fsync(self._root.fd)
            self._hook("root-fsynced", step, dirname, claim_id)
        return self._root.open_dir(dirname)

    def _dir_fd(self, dirname: str, *, create: bool, claim_id: str | None = None, step: str = "") -> int | None:
        """An fd on the key directory `dirname` beneath the held root (the store's: not to be closed), or None
        when it does not exist and `create` is false ("Layout and publication" in the README).

        The store holds the fds of the last MAX_HELD_DIRS key directories it used. A held fd is used only
        while the name beneath the root still names that very directory: one lstat of the name, relative to
        the root's fd, must show the device and inode the fd was opened on. Anything else (the name gone,
        replaced by another directory or a symlink, a mount over it) closes the held fd and opens the name
        again through safe-open, which refuses what it always refused. So a held fd writes where a new
        `Root.open_dir` would, without resolving the name and opening it for every publication."""
        held = self._held.get(dirname)
        if held is not None:
            held_fd, dev, ino = held
            if self._root.closed:
                raise ValueError(f"{self._root!r} is closed")
            try:
                st = os.lstat(dirname, dir_fd=self._root.fd)
            except OSError:
                st = None
            if st is not None and st.st_ino == ino and st.st_dev == dev:
                return held_fd
            del self._held[dirname]
            os.close(held_fd)
        fd = self._open_key_dir(dirname, create=create, claim_id=claim_id, step=step)
        if fd is not None:
            try:
                st = os.fstat(fd)
            except BaseException:
                os.close(fd)
                raise
            if len(self._held) >= MAX_HELD_DIRS:
                oldest = next(iter(self._held))
                os.close(self._held.pop(oldest)[0])
            self._held[dirname] = (fd, st.st_dev, st.st_ino)
        return fd

    def _observe_key(self, key: KeyKind, dirname: str, fd: int | None) -> KeyObservation:
        if fd is None:
            return KeyObservation(key, dirname, 0, None)
        top = self._head_number(fd, dirname)
        if not top:
            return KeyObservation(key, dirname, 0, None)
        mine = self._published.get(dirname)
        known = (mine[1], mine[2]) if mine is not None and mine[0] == top else None
        return KeyObservation(key, dirname, top, read_revision(fd, key, dirname, top, known))

    def _saw(self, dirname: str, number: int) -> None:
        if number > self._seen.get(dirname, 0):
            self._seen[dirname] = number

    def _head_number(self, fd: int, dirname: str) -> int:
        """The highest revision number in the key directory `fd` (0 for none), by existence checks from the
        last head this store saw there (module docstring); the listing only where the checks see damage."""
        try:
            lo = self._seen.get(dirname, 0)
            if not exists(fd, lo if lo else 1):
                # The chain is shorter than this store saw, or has no r1: empty, or damaged.
                return self._listed_head(fd, dirname)
            lo = max(lo, 1)
            step = 1
            while exists(fd, lo + step):  # gallop: lo exists, lo + step is the next check
                lo += step
                step *= 2
            hi = lo + step  # absent
            while hi - lo > 1:  # bisect: lo exists, hi does not
                mid = (lo + hi) // 2
                if exists(fd, mid):
                    lo = mid
                else:
                    hi = mid
        except Undecided:
            return self._listed_head(fd, dirname)
        self._saw(dirname, lo)
        return lo

    def _listed_head(self, fd: int, dirname: str) -> int:
        """The highest revision number by listing the directory: the definition of the head, used only where
        the existence checks contradict a gap-free chain."""
        numbers = [n for n in (parse_revision_name(x) for x in os.listdir(fd)) if n is not None]
        top = max(numbers, default=0)
        self._seen[dirname] = top
        return top

    def observe_key(self, key: SeatKey | SessionKey) -> KeyObservation:
        """One key's chain as it is now: the highest revision number and that revision (or why it does not
        parse)."""
        return self._observe_key(key.kind, key.dirname, self._dir_fd(key.dirname, create=False))

    def observe(self, seat: SeatKey, session: SessionKey) -> PairObservation:
        """Both keys of a pair, the seat key first. Writes nothing."""
        return PairObservation(self.observe_key(seat), self.observe_key(session))

    def read_chain(self, key: SeatKey | SessionKey) -> list[Revision | Unreadable]:
        """Every revision of one key, oldest first (for inspection; the rules read only heads)."""
        fd = self._dir_fd(key.dirname, create=False)
        if fd is None:
            return []
        numbers = sorted(n for n in (parse_revision_name(x) for x in os.listdir(fd)) if n is not None)
        return [read_revision(fd, key.kind, key.dirname, n) for n in numbers]

    # -- publishing --------------------------------------------------------------------------------------

    def _publish_one(self, rev: Revision, step: str) -> bool:
        """Publish one revision; False when the link() was lost. Raises `ClaimWriteError` for an OSError,
        naming the key, the step and the revision."""
        # Every revision is checked against the proof rules before it is written, whoever built it.
        check_proof(rev.proof, state=rev.state, spawn_marker=rev.spawn_marker, by_restart=rev.writer.role == "restart")
        dirname = rev.dirname
        try:
            fd = self._dir_fd(dirname, create=True, claim_id=rev.claim_id, step=step)
            assert fd is not None
            try:
                data = publish(fd, rev, step, self._hook if self._barrier is not None else None)
            except LostLink:
                self._saw(dirname, rev.number)  # another writer's revision is there
                return False
            self._saw(dirname, rev.number)
            self._published[dirname] = (rev.number, data, rev)
            if rev.state is State.STOPPED and (rev.claim_id in self._reserved or step == "restart"):
                drop_reserves(fd, rev.claim_id)  # the claim is over on this key: its room goes back
            return True
        except ClaimWriteError:
            raise
        except OSError as exc:
            raise ClaimWriteError(exc, key=rev.key, dirname=rev.dirname, step=step, claim_id=rev.claim_id,
                                  number=rev.number) from exc

    def _reserve(self, dirname: str, claim_id: str, size: int, count: int) -> None:
        """Make `count` reserve files of `size` bytes for `claim_id` in the key directory (`_disk.make_reserves`);
        the claim's reserves go when it stops. Raises OSError."""
        self._reserved.add(claim_id)
        fd = self._dir_fd(dirname, create=False)
        if fd is None:
            raise FileNotFoundError(errno.ENOENT, f"no key directory {dirname}")
        make_reserves(fd, claim_id, size, count)

    # -- acquisition -------------------------------------------------------------------------------------

    def acquire(self, seat: SeatKey, session: SessionKey, binding: Binding, *, generation: int = 1,
                eligibility: str | None = None) -> Claim:
        """Take the pair under a new claim ID: reserved on the seat key, then on the session key (§2
        "Lifecycle" 1), with the intended unit name recorded before anything is spawned.

        With `eligibility` (an ID of 1 to 128 characters of [A-Za-z0-9._:-], else ValueError before
        anything is read or published) the reservation is a recovery's (§6 "Recover"): both keys record
        `Eligibility(eligibility, taken=False)`, every later revision of the claim carries it, this
        process never spawns under it (`Claim.mark_spawn` raises while it is pending), and a launcher takes
        the claim over with `take_over(..., eligibility=...)`, once.

        Both keys are read before anything is published. Refuses (ClaimRefusal):
        - foreign-host when a head was written on another machine (W17); nothing is written;
        - already-active when the pair is reserved or active (W1, W2, W4);
        - unsafe-replacement when it is stopping, uncertain, stopped without proof, unreadable, or held under
          two claim IDs (W3, W16).
        A lost link() on the seat key re-reads and re-decides. When the session key turns out held after
        the seat key was published, the seat revision is followed by stopped with a no-unit reference (the
        loser never spawned) and the session key's refusal is raised (W4). Acquisition never classifies a
        claim whose owner is gone: that is `restart`.
        """
        self._check_process()
        if binding.harness != session.harness:
            raise ValueError("the binding's harness and the session key's harness differ")
        pending = None if eligibility is None else Eligibility(eligibility, False)
        for _ in range(MAX_ROUNDS):
            pair = self.observe(seat, session)
            refusal = refusal_for(pair, self.host)
            if refusal is not None:
                raise refusal
            claim_id = mint_claim_id()
            now = self._clock()
            seat_rev = new_reservation("seat", pair.seat.head_number + 1, seat=seat, session=session,
                                       claim_id=claim_id, binding=binding, host=self.host, owner=self.owner,
                                       generation=generation, now=now, eligibility=pending)
            if not self._publish_one(seat_rev, "reserve"):
                continue
            self._hook("between-keys", "reserve", seat.dirname, claim_id)
            try:
                return self._reserve_session(seat_rev, pair.session, session, now)
            except ClaimRefusal:
                raise
            except Exception:
                # An I/O error after the seat key was taken: give the seat key back (this process never
                # spawned under the claim) rather than hold it until this process dies.
                try:
                    self._follow_up_loser(seat_rev, None)
                except Exception:  # noqa: BLE001 - the original error is the one to report
                    pass
                raise
        raise ClaimRefusal("already-active", f"the pair kept changing; gave up after {MAX_ROUNDS} rounds")

    def _reserve_session(self, seat_rev: Revision, session_obs: KeyObservation, session: SessionKey,
                         now: float) -> Claim:
        """The second half of acquisition: reserved on the session key, or the W4 follow-up and refusal."""
        for _ in range(MAX_ROUNDS):
            sess_rev = seat_rev.evolve(key="session", number=session_obs.head_number + 1,
                                       published_at=utc_timestamp(now))
            if self._publish_one(sess_rev, "reserve"):
                return Claim(self, seat_rev, sess_rev)
            session_obs = self.observe_key(session)
            refusal = key_refusal(session_obs, self.host)
            if refusal is not None:
                self._follow_up_loser(seat_rev, refusal)
                raise refusal
        self._follow_up_loser(seat_rev, None)
        raise ClaimRefusal("already-active", f"the session key kept changing; gave up after {MAX_ROUNDS} rounds")

    def _follow_up_loser(self, seat_rev: Revision, refusal: ClaimRefusal | None) -> None:
        """W4: a contender that published on the seat key and then found the session key held follows its
        seat revision with stopped and a no-unit reference. It never spawned."""
        proof = ProofRef.never_spawned(seat_rev.claim_id, refusal.code if refusal else "session key contended")
        check_proof(proof, state=State.STOPPED, spawn_marker=seat_rev.spawn_marker, by_restart=False)
        follow = seat_rev.evolve(number=seat_rev.number + 1, state=State.STOPPED, proof=proof,
                                 reason="follow-up", published_at=utc_timestamp(self._clock()))
        if not self._publish_one(follow, "follow-up"):
            raise ClaimRefusal("unsafe-replacement",
                               f"another writer published on the seat key held by {seat_rev.claim_id}")

    # -- restart classification --------------------------------------------------------------------------

    def restart(self, seat: SeatKey, session: SessionKey, probe: CohortProbe) -> RestartReport:
        """Classify (and complete) what a previous controller left on the pair (§2 "Owner check",
        "Restart and half-done pairs"). Never launches, never mints a claim ID, and never touches a claim
        whose owner is alive or cannot be proven gone (outcome owner-alive). A foreign head writes nothing.

        See `Outcome` and the README for each outcome and what it publishes. Raises ClaimRefusal
        unsafe-replacement only if the pair kept changing under it for MAX_ROUNDS rounds.
        """
        self._check_process()
        writer = Writer(self.process, self.incarnation, "restart")
        oracle = _Oracle(self._liveness, probe, self.host)
        published: list[tuple[KeyKind, int]] = []
        for _ in range(MAX_ROUNDS):
            pair = self.observe(seat, session)
            decisions = classify(pair, me=self.host, writer=writer, now=self._clock(), oracle=oracle)
            if self._publish_all(decisions, published):
                after = self.observe(seat, session)
                return RestartReport(decisions, tuple(published), after, refusal_for(after, self.host))
        raise ClaimRefusal("unsafe-replacement", f"the pair kept changing during restart; gave up after "
                                                 f"{MAX_ROUNDS} rounds")

    def _publish_all(self, decisions: tuple[GroupDecision, ...], published: list[tuple[KeyKind, int]]) -> bool:
        for d in decisions:
            for i, pub in enumerate(d.publications):
                if i:
                    prev: Publication = d.publications[i - 1]
                    self._hook("between-keys", "restart", prev.revision.dirname, pub.revision.claim_id)
                if not self._publish_one(pub.revision, "restart"):
                    return False
                published.append((pub.key, pub.revision.number))
        return True

    # -- adoption ----------------------------------------------------------------------------------------

    def adopt(self, seat: SeatKey, session: SessionKey, claim_id: str) -> Claim:
        """Become the owner of a claim whose owner is proven gone, to continue its stop (§6 "Controller
        death during force stop": the restart "re-runs the escalation ... for the same stop record").

        Publishes the claim's current state again on both keys with this store as owner (reason adopt),
        under the same claim ID, each key carrying what either key knows (spawn marker, invocation ID,
        engine, cohort reference): the returned Claim's heads expose the recorded `cohort` and stop
        record, from which the stop is continued (K10, K11).

        Refuses foreign-host for another machine's claim; already-active while any recorded owner is alive
        or cannot be proven gone (W12), and when another process that is alive published on a key first
        (two adopters at once: the winner's start is live, issue 28 item 6); unsafe-replacement when the
        pair is unreadable, held by another claim, not held by this one, half-done (run `restart` first)
        or from another boot (restart stops it with a boot proof).
        """
        self._check_process()
        pair = self.observe(seat, session)
        refusal = adopt_refusal(pair, claim_id, self.host)
        if refusal is not None:
            raise refusal
        heads = {o.key: o.revision for o in pair.keys()}
        for rev in heads.values():
            assert rev is not None
            if self._liveness.owner_alive(rev.owner) is not False:
                raise ClaimRefusal("already-active", f"the owner of {claim_id} (pid {rev.owner.process.pid}) "
                                                     "is alive or cannot be proven gone")
        seat_head, sess_head = heads["seat"], heads["session"]
        assert seat_head is not None and sess_head is not None
        writer = Writer(self.process, self.incarnation, "owner")
        known = known_to_either((seat_head, sess_head))
        out: list[Revision] = []
        for head in (seat_head, sess_head):
            if out:
                self._hook("between-keys", "adopt", seat.dirname, claim_id)
            rev = head.evolve(number=head.number + 1, owner=self.owner, writer=writer, reason="adopt",
                              published_at=utc_timestamp(self._clock()), **known)
            if not self._publish_one(rev, "adopt"):
                raise self._lost_adoption(seat if head.key == "seat" else session, claim_id)
            out.append(rev)
        return Claim(self, out[0], out[1])

    def _lost_adoption(self, key: SeatKey | SessionKey, claim_id: str) -> ClaimRefusal:
        """Why an adoption whose link() on `key` was lost refuses: another process published there first.
        When the revision that won was written by a process that is alive (another controller adopting, or
        classifying, at the same moment), or whose owner is, the pair is held by a live start:
        already-active, never a repair (issue 28 item 6). Otherwise unsafe-replacement, as before."""
        won = self.observe_key(key).revision
        if won is not None:
            for who, process in (("writer", won.writer.process), ("owner", won.owner.process)):
                if self._liveness.owner_alive(Owner(process, won.writer.incarnation)) is not False:
                    return ClaimRefusal("already-active", f"another controller published on the {won.key} key of "
                                                          f"{claim_id} first; its {who} (pid {process.pid}) is "
                                                          "alive: one controller per pair")
        return ClaimRefusal("unsafe-replacement", f"another writer published on the {key.kind} key of {claim_id}")

    # -- take-over by a launcher ---------------------------------------------------------------------------

    def take_over(self, seat: SeatKey, session: SessionKey, claim_id: str, *, eligibility: str) -> Claim:
        """Become the owner of a recovery reservation by consuming its eligibility, once (§6 "Recover": the
        launcher "revalidates the record against the claim ..., consumes it once, and spawns"; K17).

        The caller is the launcher, usually another process than the controller that reserved the claim
        (`acquire(..., eligibility=...)`), which may still be alive: its liveness is not asked. Publishes,
        seat key then session key, each head again with this store as owner (writer role owner, reason
        take-over) and `Eligibility(eligibility, taken=True)`, still reserved, no spawn marker, under the
        same claim ID; the returned Claim then publishes the spawn marker and the rest as any owner. The
        record's other contents (stop, pins, leaf, incarnation) are the controller's to check before.

        Refuses (nothing published): foreign-host for another machine's head; unsafe-replacement for an
        unreadable head or one from another boot; eligibility unless both keys are `claim_id`'s, reserved,
        with no spawn marker and the eligibility pending under this ID, and also when another writer's
        link() wins on the seat key (two launchers at once: exactly one takes the claim). If another
        writer's link() wins on the session key after the seat key was taken over, the refusal is
        eligibility too and the seat key keeps the take-over: a half-done take-over, which never turns
        pending again and which restart classification settles once its owners are gone.
        Raises ValueError for an eligibility ID that is not one.
        """
        self._check_process()
        Eligibility(eligibility, True)  # the ID's checks, before anything is read
        pair = self.observe(seat, session)
        refusal = take_over_refusal(pair, claim_id, eligibility, self.host)
        if refusal is not None:
            raise refusal
        seat_head, sess_head = pair.seat.revision, pair.session.revision
        assert seat_head is not None and sess_head is not None
        writer = Writer(self.process, self.incarnation, "owner")
        taken = Eligibility(eligibility, True)
        out: list[Revision] = []
        for head in (seat_head, sess_head):
            if out:
                self._hook("between-keys", "take-over", seat.dirname, claim_id)
            rev = head.evolve(number=head.number + 1, owner=self.owner, writer=writer, reason="take-over",
                              eligibility=taken, published_at=utc_timestamp(self._clock()))
            check_owner_transition(head, rev, take_over=True)
            if not self._publish_one(rev, "take-over"):
                raise ClaimRefusal("eligibility", f"another writer published on the {head.key} key of {claim_id} "
                                                  "first; the eligibility is not this launcher's")
            out.append(rev)
        return Claim(self, out[0], out[1])


