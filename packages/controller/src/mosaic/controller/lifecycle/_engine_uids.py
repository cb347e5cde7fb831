"""An engine uid per execution: a uid allocated from a configured range for each launch, recorded in the
claim (writer-claim's `engineUid`, with the spawn marker) and on the binding record, never given to another
execution while a cohort of it may live. Issue 28 item 3: with one engine account every engine shared one
RLIMIT_NPROC (the kernel counts it per uid), so one conversation's fork storm made another's tools fail
`spawn /bin/bash EAGAIN`; a uid per execution makes that bound, and every other per-uid one, the
conversation's own. systemd's DynamicUser= does the same for services (a uid from a range, leased while the
unit runs, lock files in /run/systemd/dynamic-uid).

The rules this file keeps:

1. **Where.** `EngineUids(first, count, gid, state_dir)`: the uids `first` .. `first + count - 1`, every
   engine in the one group `gid` (the engine group: a project, HOME and agent dir that executions share are
   that group's, README "An engine uid per execution"), and `state_dir`, a private directory of this uid
   (not a symlink, mode 0700 or stricter) holding the leases, the cursor and the lock. It must be the same
   directory for every controller that allocates from the range: a lease is what keeps two of them apart.
2. **A uid is free only when proven free**, under the state directory's lock (`flock`, held while one
   allocation decides and writes): (a) no passwd entry names it (it is nobody's account: an account's files
   and processes are its own); (b) no process of it is alive (every `/proc/<pid>/status`, its real,
   effective, saved and file-system uid; an unreadable `/proc` proves nothing, so nothing is free); (c) no
   claim that is not stopped with a proof names it: its lease (`<uid>.lease`, written before the uid is
   recorded in the claim, naming the claim root, the pair and the claim ID) is absent, from an earlier boot
   (every process of that boot is gone, as a boot proof says), or names a claim whose both keys are stopped
   with a proof, or taken by a later claim (which only a proven stop allows). A lease that cannot be read,
   a claim root that cannot be opened, a head that does not parse: not proven, not free.
3. **Which.** The next uid after the last one allocated (`cursor`), cyclically, as the kernel allocates
   pids: a uid freed a moment ago is the last to be given again. None free: `no-engine-uid`, naming what
   held each uid (counted by reason), nothing written.
4. **What the engine keeps.** Pi keeps state in its agent dir and HOME (its credential store `auth.json` is
   created 0600: found on the real Pi, a second execution under another uid failed its turn "Credential
   store read failed ... EACCES"). Before each launch under an allocated uid, `hand_over` gives that uid
   every entry of the engine's state directories (`Engine.state_dirs`: `PiSpec.state_dirs`; Claude's, the
   seal's HOME, config and temp directories besides `ClaudeSpec.state_dirs`) that a uid of the range owns,
   as systemd does for a DynamicUser= service's StateDirectory=: a walk that never follows a symlink nor
   leaves the directory's file system, `lchown` only of what the range owns (never anyone else's), and a
   regular file with more than one link left as it is (a hard link an earlier engine made to another
   conversation's file is not this one's to take).
5. **Held how long.** A lease is never removed by its holder: the next allocation that reaches the uid
   reads the claim it names, and reclaims it once rule 2 proves it free. So a crash anywhere (before the
   spawn marker, after the launch, during a stop) leaves the uid held exactly as long as its claim may have
   a cohort.

Limits (README): a process of the uid in a pid namespace the controller cannot see is not seen (run the
controller in the initial one); files and System V IPC objects an execution left outside the shared tree
(in /tmp, say) stay owned by its uid and are the next holder's to read (as with DynamicUser= without
PrivateTmp=/RemoveIPC=): the cyclic order makes that as late as the range allows.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import stat
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mosaic.controller_client import ControlRefusal
from mosaic.safe_open import Refusal, current_host
from mosaic.writer_claim import Claim, ClaimStore, SeatKey, SessionKey, State

__all__ = ["LEASE_SUFFIX", "EngineUids", "Lease", "claim_over", "hand_over", "live_uids"]

LEASE_SUFFIX = ".lease"
_LOCK = "lock"
_CURSOR = "cursor"
_UID_MAX = 2**32 - 2  # (uid_t)-1 is "no id" to the kernel


@dataclass(frozen=True)
class Lease:
    """Who holds an engine uid: the claim (its root, pair and ID) it was allocated for, and the host and boot
    it was allocated on."""

    uid: int
    claim_root: str
    seat: SeatKey
    session: SessionKey
    claim_id: str
    machine_id: str
    boot_id: str
    leased_at: float

    def to_json(self) -> dict[str, Any]:
        return {"uid": self.uid, "claimRoot": self.claim_root, "seat": self.seat.to_json(),
                "session": self.session.to_json(), "claimId": self.claim_id, "machineId": self.machine_id,
                "bootId": self.boot_id, "leasedAt": self.leased_at}

    @classmethod
    def from_json(cls, value: Any) -> Lease:
        """Strict: exactly these fields, each of its type; ValueError (or KeyError, TypeError) otherwise."""
        keys = {"uid", "claimRoot", "seat", "session", "claimId", "machineId", "bootId", "leasedAt"}
        if not isinstance(value, dict) or set(value) != keys:
            raise ValueError("a lease is a JSON object with exactly the lease's fields")
        seat, session = value["seat"], value["session"]
        uid = value["uid"]
        if not isinstance(uid, int) or isinstance(uid, bool):
            raise ValueError("a lease's uid is an integer")
        return cls(uid, str(value["claimRoot"]), SeatKey(seat["seat"], seat["project"], seat["workspace"]),
                   SessionKey(session["harness"], session["sessionId"]), str(value["claimId"]),
                   str(value["machineId"]), str(value["bootId"]), float(value["leasedAt"]))


def live_uids() -> set[int]:
    """Every uid (real, effective, saved, file-system) of every process this host's /proc lists now. A
    process that ends while it is read is skipped; /proc itself unreadable raises OSError (nothing can be
    proven free then)."""
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        found.update(int(x) for x in line.split()[1:5])
                        break
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone meanwhile
    return found


@dataclass(frozen=True)
class EngineUids:
    """The range engine uids are allocated from, their group, and the state directory (module rule 1).
    Raises ControlRefusal `configuration` for a range outside 1 .. 2^32 - 2, a gid that is not one, or a
    state directory that is not a private directory of this uid."""

    first: int
    count: int
    gid: int
    state_dir: str

    def __post_init__(self) -> None:
        for name, value, least in (("first", self.first, 1), ("count", self.count, 1), ("gid", self.gid, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ControlRefusal("configuration", f"engine uids: {name} {value!r} is not an integer of at "
                                                      f"least {least}")
        if self.first + self.count - 1 > _UID_MAX or self.gid > _UID_MAX:
            raise ControlRefusal("configuration", f"engine uids: {self.first} + {self.count} passes {_UID_MAX}")
        try:
            st = os.stat(self.state_dir, follow_symlinks=False)
        except OSError as exc:
            raise ControlRefusal("configuration", f"engine uids: state directory {self.state_dir!r}: "
                                                  f"{exc.strerror}") from None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ControlRefusal("configuration", f"engine uids: state directory {self.state_dir!r} must be a "
                                                  "directory of this uid that no one else may enter (mode 0700)")

    @property
    def uids(self) -> range:
        return range(self.first, self.first + self.count)

    # -------------------------------------------------------------------------------------- allocation

    def allocate(self, claim: Claim, claim_root: str) -> int:
        """Blocking. The next uid of the range proven free (module rules 2 and 3), leased to `claim` (in the
        claim root `claim_root`) before it returns; the caller records it in the claim (`mark_spawn`) and
        launches under it. Raises ControlRefusal `no-engine-uid` when no uid is free (what held each one,
        counted, in its message); OSError for a state directory that cannot be written."""
        host = current_host()
        with self._locked() as dir_fd:
            try:
                live = live_uids()
            except OSError as exc:
                raise ControlRefusal("no-engine-uid", f"/proc cannot be read ({exc.strerror}): no uid can be "
                                                      "proven free of processes") from None
            start = self._cursor(dir_fd)
            held: Counter[str] = Counter()
            for offset in range(1, self.count + 1):
                uid = self.first + (start - self.first + offset) % self.count
                why = self._held(dir_fd, uid, live, host.boot_id)
                if why is not None:
                    held[why] += 1
                    continue
                lease = Lease(uid, claim_root, claim.seat, claim.session, claim.claim_id, host.machine_id,
                              host.boot_id, time.time())
                self._write(dir_fd, f"{uid}{LEASE_SUFFIX}", json.dumps(lease.to_json(), sort_keys=True))
                self._write(dir_fd, _CURSOR, str(uid))
                return uid
        reasons = "; ".join(f"{n} {why}" for why, n in held.most_common())
        raise ControlRefusal("no-engine-uid", f"no uid of {self.first}-{self.first + self.count - 1} is free: "
                                              f"{reasons}")

    def lease(self, uid: int) -> Lease | None:
        """The lease of `uid` now, or None (none, or unreadable). For diagnostics and tests."""
        dir_fd = os.open(self.state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            return self._read_lease(dir_fd, uid)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        finally:
            os.close(dir_fd)

    # ------------------------------------------------------------------------------------- the proof

    def _held(self, dir_fd: int, uid: int, live: set[int], boot_id: str) -> str | None:
        """Why `uid` is not proven free (module rule 2), or None when it is."""
        try:
            pwd.getpwuid(uid)
            return "are accounts (a passwd entry names them)"
        except KeyError:
            pass
        if uid in live:
            return "have a live process"
        try:
            lease = self._read_lease(dir_fd, uid)
        except (OSError, ValueError, KeyError, TypeError):
            return "have a lease that cannot be read"
        if lease is None or lease.boot_id != boot_id:
            return None  # never leased, or leased on a boot whose every process is gone
        return None if claim_over(lease) else "are named by a claim that is not stopped with a proof"

    @staticmethod
    def _read_lease(dir_fd: int, uid: int) -> Lease | None:
        try:
            fd = os.open(f"{uid}{LEASE_SUFFIX}", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as f:
            lease = Lease.from_json(json.loads(f.read(1 << 16)))
        if lease.uid != uid:
            raise ValueError("a lease names another uid than its file")
        return lease

    # -------------------------------------------------------------------------------- the directory

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        dir_fd = os.open(self.state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            lock = os.open(_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                yield dir_fd
            finally:
                os.close(lock)  # releases the flock
        finally:
            os.close(dir_fd)

    def _cursor(self, dir_fd: int) -> int:
        """The last uid allocated (the next search starts after it); `first - 1` when none or unreadable."""
        try:
            fd = os.open(_CURSOR, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return self.first - 1
        with os.fdopen(fd, "rb") as f:
            text = f.read(32).strip()
        last = int(text) if text.isdigit() else self.first - 1
        return last if last in self.uids else self.first - 1

    @staticmethod
    def _write(dir_fd: int, name: str, text: str) -> None:
        """`name` replaced whole by `text` (a fsynced temporary file renamed over it, the directory fsynced)."""
        tmp = f".{name}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            os.write(fd, text.encode("utf-8") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)


def hand_over(directories: tuple[str, ...], uid: int, owners: range) -> int:
    """Blocking. Give `uid` every entry of `directories` (the directories themselves included) that a uid of
    `owners` (the range) owns and `uid` does not (module rule 4): no symlink followed, no other file system
    entered, a regular file with more than one link left alone. Returns how many entries changed owner. A
    directory that does not exist is skipped; one that is not a directory (a symlink) raises
    NotADirectoryError; any other OSError is raised."""
    changed = 0
    for top in directories:
        try:
            top_st = os.lstat(top)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(top_st.st_mode):
            raise NotADirectoryError(f"an engine state directory is not a directory (a symlink?): {top}")
        device = top_st.st_dev
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames[:] = [d for d in dirnames if os.lstat(os.path.join(dirpath, d)).st_dev == device]
            for path in (dirpath, *(os.path.join(dirpath, n) for n in (*dirnames, *filenames))):
                st = os.lstat(path)
                if st.st_uid == uid or st.st_uid not in owners:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    continue
                os.chown(path, uid, -1, follow_symlinks=False)
                changed += 1
    return changed


def claim_over(lease: Lease) -> bool:
    """The claim a lease names is proven over (module rule 2c): on both keys, its last revision is stopped with
    a proof, or a later claim heads the key. Anything unreadable is not proof."""
    try:
        with ClaimStore(lease.claim_root) as store:
            pair = store.observe(lease.seat, lease.session)
    except (OSError, ValueError, Refusal):  # the root gone, unsafe or unreadable: nothing is proven
        return False
    for obs in pair.keys():
        rev = obs.revision
        if rev is None:
            return False  # no readable head: nothing proves the claim ended on this key
        if rev.claim_id == lease.claim_id and not (rev.state is State.STOPPED and rev.proof is not None):
            return False
    return True
