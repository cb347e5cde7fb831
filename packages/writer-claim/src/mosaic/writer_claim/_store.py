"""The claim store: the file-system shell around the decision core.

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

A full disk does not stop a stop (issue 19). `Claim.reserve_space` preallocates, in each key directory,
room for the revisions a stop needs (`RESERVE_REVISIONS` files named `.reserve-<claim ID>-<k>`, each as
large as any later revision of the claim can be). When the temporary file of a publication on the safety
path (`RESERVE_STEPS`: engine, active, uncertain, stopping, stopped, adopt, restart) cannot be written for
want of room
(ENOSPC, EDQUOT), one reserve is renamed to the temporary name and the revision written into its
allocated blocks (then truncated to its length); from there the publication is the same link(), fsync and
unlink. Nothing else draws on the reserve, and the ordinary path makes exactly the calls it made before.
A publication that still cannot be written raises `ClaimWriteError` (an OSError, errno kept), which names
the key, the step, the claim and the revision number. Once a key shows its claim stopped (published by a store that made
the claim's reserves, or by a restart), the claim's reserves there are removed.

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
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from mosaic.safe_open import HostIdentity, ProcessRef, Root, SafeOpenRefusal, current_host, open_root

from ._codec import MAX_REVISION_BYTES, RecordError, decode_revision, encode_revision
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
from ._host import ProcLiveness, current_process
from ._model import (
    JSON,
    MAX_COHORT_BYTES,
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
    StopInfo,
    UnitObservation,
    Writer,
    freeze_cohort,
    mint_claim_id,
    more_conservative,
    parse_revision_name,
    revision_name,
    utc_timestamp,
)
from ._refusal import ClaimRefusal

# Barrier points, in the order one publication passes them. "between-keys" comes after the first key of
# a two-key step is complete and before the second begins (W5: "and between the two keys").
BARRIER_POINTS = (
    "key-dir-created",
    "root-fsynced",
    "temp-created",
    "temp-written",
    "temp-fsynced",
    "linked",
    "dir-fsynced",
    "temp-unlinked",
    "between-keys",
)

# The highest revision number a name can carry (`revision_name`: 10 digits).
_MAX_NUMBER = 9_999_999_999

# A lost link() is re-read and re-decided. Each loss means another writer made progress, so this bound is
# only a guard against a pathological livelock; past it the call refuses instead of spinning.
MAX_ROUNDS = 64

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

# The steps that may draw on a claim's reserved room (module docstring): what a stop and a restart publish,
# and what records a spawned engine (once it runs, the claim must be able to say so).
RESERVE_STEPS = frozenset({"engine", "active", "uncertain", "stopping", "stopped", "adopt", "restart"})
# Reserve files per key: active (or the engine record), then one stop from active or uncertain (the
# uncertain revision a fence publishes, the stop's two phases, term and kill, and stopped or uncertain at
# its end).
RESERVE_REVISIONS = 5
# What a later revision may add to the one a reserve is sized from, besides a cohort reference (recorded at
# activation, at most MAX_COHORT_BYTES): a stop record, a proof reference, the engine fields, a writer.
_RESERVE_MARGIN = 8 * 1024
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


class ClaimWriteError(OSError):
    """A revision could not be published (the caller decides what that means; nothing half-written is ever
    visible, and the key keeps its last revision). Says exactly where: `key` ("seat" or "session") and its
    directory `dirname`, the lifecycle `step`, the claim and the revision `number`; `errno` and `strerror`
    are the OS error's (ENOSPC, EDQUOT, EIO, ...)."""

    def __init__(self, cause: OSError, *, key: str, dirname: str, step: str, claim_id: str | None,
                 number: int) -> None:
        name = errno.errorcode.get(cause.errno or 0, "unknown error")
        message = (f"the {key} key ({dirname}) could not be written: {step}, revision {number} of {claim_id}: "
                   f"{name} ({cause.strerror or cause})")
        super().__init__(cause.errno, message)
        self.key = key
        self.dirname = dirname
        self.step = step
        self.claim_id = claim_id
        self.number = number

    def __str__(self) -> str:
        return str(self.strerror)


def reserve_name(claim_id: str, index: int) -> str:
    """The name of a claim's `index`-th reserve file in a key directory (a dot name no reader looks at)."""
    return f".reserve-{claim_id}-{index}"


@dataclass(frozen=True)
class Barrier:
    """One file-system step just completed by the store.

    `point` is one of BARRIER_POINTS; `step` the lifecycle step being published (reserve, spawn-marker,
    engine, active, generation, stopping, stopped, uncertain, follow-up, adopt, take-over, restart); `key`
    the key directory; `name` the file the step touched (the temporary file, or the revision for `linked`,
    whose source is `source`); `data` the bytes written at temp-written.
    """

    point: str
    step: str
    key: str
    claim_id: str | None
    name: str | None = None
    source: str | None = None
    data: bytes | None = None


BarrierHook = Callable[[Barrier], None]


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


class _LostLink(Exception):
    """link() found the revision name taken: another writer published first."""


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
        # Claims this store made reserves for (`Claim.reserve_space`): their reserves are removed when they
        # stop. A restart's stopped revision removes a dead owner's too; no other step looks for any.
        self._reserved: set[str] = set()

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def root(self) -> Root:
        return self._root

    def close(self) -> None:
        """Close the claim root if this store opened it. A claim is never changed by closing (§2 "What never
        releases a claim": disconnect)."""
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

    @contextmanager
    def _key_dir(self, dirname: str, *, create: bool, claim_id: str | None = None,
                 step: str = "") -> Iterator[int | None]:
        fd = self._open_key_dir(dirname, create=create, claim_id=claim_id, step=step)
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _read_revision(self, fd: int, key: KeyKind, dirname: str, number: int) -> Revision | Unreadable:
        name = revision_name(number)
        try:
            rfd = os.open(name, _READ_FLAGS, dir_fd=fd)
        except OSError as e:
            return Unreadable(number, f"cannot open {name}: {os.strerror(e.errno or 0)}")
        try:
            st = os.fstat(rfd)
            if not stat.S_ISREG(st.st_mode):
                return Unreadable(number, f"{name} is not a regular file")
            chunks: list[bytes] = []
            total = 0
            while total <= MAX_REVISION_BYTES:
                chunk = os.read(rfd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            data = b"".join(chunks)
        except OSError as e:
            return Unreadable(number, f"cannot read {name}: {os.strerror(e.errno or 0)}")
        finally:
            os.close(rfd)
        try:
            return decode_revision(data, key=key, dirname=dirname, number=number)
        except RecordError as e:
            return Unreadable(number, str(e))

    def _observe_key(self, key: KeyKind, dirname: str, fd: int | None) -> KeyObservation:
        if fd is None:
            return KeyObservation(key, dirname, 0, None)
        top = self._head_number(fd, dirname)
        if not top:
            return KeyObservation(key, dirname, 0, None)
        return KeyObservation(key, dirname, top, self._read_revision(fd, key, dirname, top))

    def _saw(self, dirname: str, number: int) -> None:
        if number > self._seen.get(dirname, 0):
            self._seen[dirname] = number

    def _head_number(self, fd: int, dirname: str) -> int:
        """The highest revision number in the key directory `fd` (0 for none), by existence checks from the
        last head this store saw there (module docstring); the listing only where the checks see damage."""
        try:
            lo = self._seen.get(dirname, 0)
            if not _exists(fd, lo if lo else 1):
                # The chain is shorter than this store saw, or has no r1: empty, or damaged.
                return self._listed_head(fd, dirname)
            lo = max(lo, 1)
            step = 1
            while _exists(fd, lo + step):  # gallop: lo exists, lo + step is the next check
                lo += step
                step *= 2
            hi = lo + step  # absent
            while hi - lo > 1:  # bisect: lo exists, hi does not
                mid = (lo + hi) // 2
                if _exists(fd, mid):
                    lo = mid
                else:
                    hi = mid
        except _Undecided:
            return self._listed_head(fd, dirname)
        self._saw(dirname, lo)
        return lo

    def _listed_head(self, fd: int, dirname: str) -> int:
        """The highest revision number by listing the directory (what the head was before issue 13)."""
        numbers = [n for n in (parse_revision_name(x) for x in os.listdir(fd)) if n is not None]
        top = max(numbers, default=0)
        self._seen[dirname] = top
        return top

    def observe_key(self, key: SeatKey | SessionKey) -> KeyObservation:
        """One key's chain as it is now: the highest revision number and that revision (or why it does not
        parse)."""
        with self._key_dir(key.dirname, create=False) as fd:
            return self._observe_key(key.kind, key.dirname, fd)

    def observe(self, seat: SeatKey, session: SessionKey) -> PairObservation:
        """Both keys of a pair, the seat key first. Writes nothing."""
        return PairObservation(self.observe_key(seat), self.observe_key(session))

    def read_chain(self, key: SeatKey | SessionKey) -> list[Revision | Unreadable]:
        """Every revision of one key, oldest first (for inspection; the rules read only heads)."""
        with self._key_dir(key.dirname, create=False) as fd:
            if fd is None:
                return []
            numbers = sorted(n for n in (parse_revision_name(x) for x in os.listdir(fd)) if n is not None)
            return [self._read_revision(fd, key.kind, key.dirname, n) for n in numbers]

    # -- publishing --------------------------------------------------------------------------------------

    def _publish(self, fd: int, rev: Revision, step: str) -> None:
        """Publish `rev` at its number in the key directory `fd`, or raise _LostLink."""
        data = encode_revision(rev)
        key = rev.dirname
        target = revision_name(rev.number)
        try:
            temp = self._write_temp(fd, rev, step, data)
        except OSError as exc:
            if exc.errno not in _NO_ROOM or step not in RESERVE_STEPS:
                raise
            temp = self._write_reserved(fd, rev, step, data, exc)
        try:
            os.link(temp, target, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            _unlink_quietly(temp, fd)
            raise _LostLink(target) from None
        except Exception:
            _unlink_quietly(temp, fd)
            raise
        self._hook("linked", step, key, rev.claim_id, name=target, source=temp)
        os.fsync(fd)
        self._hook("dir-fsynced", step, key, rev.claim_id)
        # The temporary name is garbage now. Its unlink is made durable by the next fsync of this
        # directory; a crash before that leaves a .tmp- file that no reader looks at.
        os.unlink(temp, dir_fd=fd)
        self._hook("temp-unlinked", step, key, rev.claim_id, name=temp)

    def _write_temp(self, fd: int, rev: Revision, step: str, data: bytes) -> str:
        """The revision's bytes in a new temporary file, fsynced; its name. On failure the file is gone."""
        key = rev.dirname
        temp = f".tmp-{rev.claim_id}-{os.getpid()}-{secrets.token_hex(4)}"
        tfd = os.open(temp, _TEMP_FLAGS, 0o600, dir_fd=fd)
        try:
            self._hook("temp-created", step, key, rev.claim_id, name=temp)
            view = memoryview(data)
            while view:
                view = view[os.write(tfd, view):]
            self._hook("temp-written", step, key, rev.claim_id, name=temp, data=data)
            os.fsync(tfd)
            self._hook("temp-fsynced", step, key, rev.claim_id, name=temp)
        except Exception:
            os.close(tfd)
            _unlink_quietly(temp, fd)
            raise
        os.close(tfd)
        return temp

    def _write_reserved(self, fd: int, rev: Revision, step: str, data: bytes, cause: OSError) -> str:
        """The file system had no room for the temporary file: take one of the claim's reserves (renamed to
        a temporary name, so two writers never share one) and write the revision into its allocated blocks,
        truncate it to the revision's length and fsync it; its temporary name. Raises `cause` when no
        reserve is left; on a failure after the rename the file is gone (that reserve with it)."""
        key = rev.dirname
        for index in range(1, RESERVE_REVISIONS + 1):
            temp = f".tmp-{rev.claim_id}-{os.getpid()}-{secrets.token_hex(4)}"
            try:
                os.rename(reserve_name(rev.claim_id, index), temp, src_dir_fd=fd, dst_dir_fd=fd)
            except FileNotFoundError:
                continue
            try:
                self._hook("temp-created", step, key, rev.claim_id, name=temp)
                tfd = os.open(temp, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                try:
                    done = 0
                    while done < len(data):
                        done += os.pwrite(tfd, data[done:], done)
                    os.ftruncate(tfd, len(data))
                    self._hook("temp-written", step, key, rev.claim_id, name=temp, data=data)
                    os.fsync(tfd)
                    self._hook("temp-fsynced", step, key, rev.claim_id, name=temp)
                finally:
                    os.close(tfd)
            except Exception:
                _unlink_quietly(temp, fd)
                raise
            return temp
        raise cause

    def _publish_one(self, rev: Revision, step: str) -> bool:
        """Publish one revision; False when the link() was lost. Raises `ClaimWriteError` for an OSError,
        naming the key, the step and the revision."""
        # Every revision is checked against the proof rules before it is written, whoever built it.
        check_proof(rev.proof, state=rev.state, spawn_marker=rev.spawn_marker, by_restart=rev.writer.role == "restart")
        try:
            with self._key_dir(rev.dirname, create=True, claim_id=rev.claim_id, step=step) as fd:
                assert fd is not None
                try:
                    self._publish(fd, rev, step)
                except _LostLink:
                    self._saw(rev.dirname, rev.number)  # another writer's revision is there
                    return False
                self._saw(rev.dirname, rev.number)
                if rev.state is State.STOPPED and (rev.claim_id in self._reserved or step == "restart"):
                    _drop_reserves(fd, rev.claim_id)  # the claim is over on this key: its room goes back
                return True
        except ClaimWriteError:
            raise
        except OSError as exc:
            raise ClaimWriteError(exc, key=rev.key, dirname=rev.dirname, step=step, claim_id=rev.claim_id,
                                  number=rev.number) from exc

    def _reserve(self, dirname: str, claim_id: str, size: int, count: int) -> None:
        """Make `count` reserve files of `size` bytes for `claim_id` in the key directory (those that exist
        are kept), each preallocated. Not fsynced: the room is for a full disk, not for power loss (a power
        loss may take it back, and a restart tops it up), and a launch waits for it. Raises OSError."""
        self._reserved.add(claim_id)
        with self._key_dir(dirname, create=False) as fd:
            if fd is None:
                raise FileNotFoundError(errno.ENOENT, f"no key directory {dirname}")
            for index in range(1, count + 1):
                try:
                    rfd = os.open(reserve_name(claim_id, index), _TEMP_FLAGS, 0o600, dir_fd=fd)
                except FileExistsError:
                    continue
                try:
                    _preallocate(rfd, size)
                except BaseException:
                    os.close(rfd)
                    _unlink_quietly(reserve_name(claim_id, index), fd)
                    raise
                os.close(rfd)

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
        or cannot be proven gone (W12); unsafe-replacement when the pair is unreadable, held by another
        claim, not held by this one, half-done (run `restart` first) or from another boot (restart stops
        it with a boot proof).
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
                raise ClaimRefusal("unsafe-replacement",
                                   f"another writer published on the {head.key} key of {claim_id}")
            out.append(rev)
        return Claim(self, out[0], out[1])

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


class _Undecided(Exception):
    """An existence check failed with something else than ENOENT: the listing decides instead."""


def _exists(dir_fd: int, number: int) -> bool:
    """Whether the name of revision `number` exists in `dir_fd`, whatever it is (a symlink or a directory
    there exists too, and reads as unreadable, as it does in a listing)."""
    if number > _MAX_NUMBER:
        return False
    try:
        os.stat(revision_name(number), dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise _Undecided(str(e)) from e
    return True


def _preallocate(fd: int, size: int) -> None:
    """Allocate `size` bytes of blocks for the file `fd` (posix_fallocate; where the file system cannot, by
    writing zeros). Raises OSError (ENOSPC when there is no room)."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    zeros = bytes(min(size, 1 << 16))
    done = 0
    while done < size:
        done += os.pwrite(fd, zeros[:size - done], done)


def _drop_reserves(dir_fd: int, claim_id: str) -> None:
    """Remove what is left of a claim's reserves in a key directory (looked up first: where there are none,
    and there are none unless `reserve_space` made them, nothing is removed)."""
    for index in range(1, RESERVE_REVISIONS + 1):
        name = reserve_name(claim_id, index)
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        _unlink_quietly(name, dir_fd)


def _unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise


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

    def __init__(self, store: ClaimStore, seat_head: Revision, session_head: Revision) -> None:
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
            new = prev.evolve(number=prev.number + 1, writer=Writer(store.process, store.incarnation, "owner"),
                              reason=reason, published_at=utc_timestamp(store._clock()), **changes)
            check_owner_transition(prev, new)
            if not store._publish_one(new, step):
                raise ClaimRefusal(
                    "unsafe-replacement",
                    f"another writer published revision {new.number} on the {key} key held by {self.claim_id}",
                )
            self._heads[key] = new

    _FORWARD: tuple[KeyKind, KeyKind] = ("seat", "session")
    _REVERSE: tuple[KeyKind, KeyKind] = ("session", "seat")

    def mark_spawn(self) -> None:
        """Publish the spawn marker on both keys, still reserved (§2 "Lifecycle" 2). The caller spawns only
        after this returns; from then on a no-unit observation can never free the pair (W20).

        Raises ValueError, before anything is published, unless reserved, and while the claim's
        eligibility is pending: a recovery reservation is spawned under only by the launcher that took it
        over (`ClaimStore.take_over`), never by the process that reserved it (§6 "Recover")."""
        if self.state is not State.RESERVED:
            raise ValueError(f"the spawn marker is published while reserved, not {self.state}")
        if any(h.eligibility is not None and not h.eligibility.taken for h in self._heads.values()):
            raise ValueError(f"the eligibility of {self.claim_id} is pending: only the launcher that takes the "
                             "claim over spawns under it")
        self._step("spawn-marker", self._FORWARD, reason="spawn-marker", state=State.RESERVED, spawn_marker=True)

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
        and a margin, in whole pages. Idempotent: reserves that exist are kept (a restart tops them up).
        Returns the bytes of each file. Raises OSError (ENOSPC: the room is not there); what was made is
        kept, and `release` removes it."""
        head = self._heads["seat"]
        size = len(encode_revision(head)) + _RESERVE_MARGIN + (MAX_COHORT_BYTES if head.cohort is None else 0)
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
