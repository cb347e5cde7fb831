"""Crash prefixes, beyond the brief (in the manner of CrashMonkey and ALICE for file systems).

A scenario (claim A's whole lifecycle, then claim B's acquisition, spawn marker and activation) runs once
with the store's `os` module replaced by a recorder that performs every call for real and logs each
mutating one (create, write, fsync of a file or a directory, link, rename, unlink, mkdir) with its
arguments: the operation log is what the store actually did, whatever its code says. The log is
interleaved with the points where each store call returned ("acks"). Every prefix of the log is then materialised in a scratch directory and the restart
classifier runs on it; the W5 invariants (claim_helpers.check_restart) must hold on each. A second
scenario does the same for a recovery (§6 "Recover"): a reservation with an eligibility, its take-over by
a launcher and the launcher's lifecycle, then a reservation nobody takes over.

Two crash models:

- process crash (SIGKILL, or a kernel that keeps its page cache): the state after a prefix is exactly
  what the operations made;
- power loss, under this persistence model (README "Persistence model"):
  * file data is durable only after fsync of the file; data written but not fsynced may come back empty
    or cut at any point (we materialise empty, half and whole);
  * a directory entry operation (create, link, unlink, mkdir) is durable only after fsync of the
    directory that holds it; until then each such operation may independently be lost, and the ones
    kept apply in their original order;
  * fsync of a directory makes every earlier entry operation in it durable; fsync of a file makes its
    data durable.
  Every state the model allows for each prefix is materialised (duplicates once).

link() of a file whose data is not yet durable would let a revision name reach incomplete bytes under
this model; the store never does that (temp fsync comes before link), and the mutants that drop either
fsync die here.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claim_helpers import (
    BINDING,
    ENGINE,
    OTHER_BOOT,
    REV_RE,
    SEAT,
    SESSION,
    Ack,
    Liveness,
    Probe,
    check_restart,
    cohort_ref,
    make_store,
    raw_holders,
    run_lifecycle,
    run_recovery,
    unit_world,
)

# The point of this test is the store's own file-system calls, which it records by swapping the `os` the
# store's modules use (README "Persistence model").
from mosaic.writer_claim.internals import store_os


@dataclass(frozen=True)
class Op:
    """One mutating file-system call: kind, the key directory it acted in ("" for the claim root), the
    name it acted on, a link's or rename's source, and the bytes of a write."""

    kind: str
    key: str
    name: str = ""
    source: str = ""
    data: bytes = b""


Entry = Op | tuple[str, str]  # an operation, or an ack (claim id, step)


class RecordingOS:
    """Stands in for the `os` module inside the claim store (`store_os`): every call is the real one; the
    mutating ones are logged after they succeed."""

    def __init__(self, log: list[Entry], root: Path) -> None:
        self._log = log
        self._root = os.path.realpath(root)
        self._files: dict[int, tuple[str, str]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def _where(self, dir_fd: int) -> str:
        path = os.readlink(f"/proc/self/fd/{dir_fd}")
        return "" if path == self._root else os.path.basename(path)

    def open(self, path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = os.open(path, flags, mode, dir_fd=dir_fd)
        if flags & os.O_CREAT:
            assert dir_fd is not None
            self._files[fd] = (self._where(dir_fd), path)
            self._log.append(Op("create", self._files[fd][0], path))
        return fd

    def write(self, fd: int, data: Any) -> int:
        n = os.write(fd, data)
        if fd in self._files:
            key, name = self._files[fd]
            self._log.append(Op("write", key, name, data=bytes(data[:n])))
        return n

    def fsync(self, fd: int) -> None:
        os.fsync(fd)
        if fd in self._files:
            key, name = self._files[fd]
            self._log.append(Op("fsync-file", key, name))
        else:
            self._log.append(Op("fsync-dir", self._where(fd)))

    def close(self, fd: int) -> None:
        os.close(fd)
        self._files.pop(fd, None)

    def link(self, src: str, dst: str, *, src_dir_fd: int, dst_dir_fd: int, follow_symlinks: bool = True) -> None:
        os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)
        self._log.append(Op("link", self._where(dst_dir_fd), dst, source=src))

    def rename(self, src: str, dst: str, *, src_dir_fd: int, dst_dir_fd: int) -> None:
        os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        self._log.append(Op("rename", self._where(dst_dir_fd), dst, source=src))

    replace = rename

    def unlink(self, path: str, *, dir_fd: int) -> None:
        os.unlink(path, dir_fd=dir_fd)
        self._log.append(Op("unlink", self._where(dir_fd), path))

    def mkdir(self, path: str, mode: int = 0o777, *, dir_fd: int) -> None:
        os.mkdir(path, mode, dir_fd=dir_fd)
        self._log.append(Op("mkdir", self._where(dir_fd), path))


def _lifecycles(root: Path, ack: Callable[[str, str], None]) -> None:
    """Claim A's whole lifecycle, then claim B's reserve, spawn marker and activation."""
    run_lifecycle(make_store(root, pid=2000), ack, tag="a")
    c = make_store(root, pid=2001).acquire(SEAT, SESSION, BINDING)
    ack(c.claim_id, "acquire")
    c.mark_spawn()
    ack(c.claim_id, "spawn-marker")
    ack(c.claim_id, "spawned")
    c.activate(invocation_id="inv-b", engine=ENGINE, cohort=cohort_ref(c.claim_id, c.head("seat").host, "inv-b"))
    ack(c.claim_id, "active")


def _recoveries(root: Path, ack: Callable[[str, str], None]) -> None:
    """A recovery (§6 "Recover"): claim A reserved with an eligibility by one owner, taken over by a
    launcher (another store), then spawned, activated, stopped and released; then claim B reserved with
    an eligibility that no launcher takes."""
    run_recovery(make_store(root, pid=2000), make_store(root, pid=2001), ack, tag="a", eligibility="elig-a")
    c = make_store(root, pid=2002).acquire(SEAT, SESSION, BINDING, generation=3, eligibility="elig-b")
    ack(c.claim_id, "acquire")


def record_scenario(root: Path,
                    scenario: Callable[[Path, Callable[[str, str], None]], None] = _lifecycles) -> list[Entry]:
    root.mkdir()
    log: list[Entry] = []
    recorder = RecordingOS(log, root)

    def ack(claim_id: str, step: str) -> None:
        log.append((claim_id, step))

    with store_os(recorder):
        scenario(root, ack)
    return log


@dataclass
class Model:
    """The file system as the operation log left it, and what of it is durable."""

    dirs: dict[str, dict[str, int]] = field(default_factory=dict)  # key dir -> name -> inode
    data: dict[int, bytes] = field(default_factory=dict)
    durable_data: dict[int, bytes] = field(default_factory=dict)
    durable_dirs: set[str] = field(default_factory=set)  # key dirs whose entry in the root is durable
    pending_root: list[str] = field(default_factory=list)
    durable_entries: dict[str, dict[str, int]] = field(default_factory=dict)
    pending: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)  # ("add"|"del", name, inode)
    next_inode: int = 1

    def apply(self, op: Op) -> None:
        key = op.key
        if op.kind == "mkdir":
            assert key == ""
            self.dirs[op.name] = {}
            self.durable_entries[op.name] = {}
            self.pending[op.name] = []
            self.pending_root.append(op.name)
        elif op.kind == "fsync-dir" and key == "":
            self.durable_dirs.update(self.pending_root)
            self.pending_root = []
        elif op.kind == "fsync-dir":
            self.durable_entries[key] = dict(self.dirs[key])
            self.pending[key] = []
        elif op.kind == "create":
            ino, self.next_inode = self.next_inode, self.next_inode + 1
            self.dirs[key][op.name] = ino
            self.data[ino] = b""
            self.pending[key].append(("add", op.name, ino))
        elif op.kind == "write":
            ino = self.dirs[key][op.name]
            self.data[ino] += op.data
        elif op.kind == "fsync-file":
            ino = self.dirs[key][op.name]
            self.durable_data[ino] = self.data[ino]
        elif op.kind in ("link", "rename"):
            ino = self.dirs[key][op.source]
            self.dirs[key][op.name] = ino
            self.pending[key].append(("add", op.name, ino))
            if op.kind == "rename":
                del self.dirs[key][op.source]
                self.pending[key].append(("del", op.source, ino))
        elif op.kind == "unlink":
            ino = self.dirs[key].pop(op.name)
            self.pending[key].append(("del", op.name, ino))
        else:
            raise AssertionError(f"unknown operation {op}")

    def process_crash_state(self) -> dict[str, dict[str, bytes]]:
        return {d: {n: self.data[i] for n, i in names.items()} for d, names in self.dirs.items()}

    def power_loss_states(self) -> Iterator[dict[str, dict[str, bytes]]]:
        root_choices = [
            set(kept) for r in range(len(self.pending_root) + 1) for kept in itertools.combinations(self.pending_root, r)
        ]
        per_dir: dict[str, list[dict[str, int]]] = {}
        for d in self.dirs:
            ops = self.pending[d]
            variants = []
            for mask in itertools.product((False, True), repeat=len(ops)):
                entries = dict(self.durable_entries[d])
                for keep, (kind, name, ino) in zip(mask, ops, strict=True):
                    if not keep:
                        continue
                    if kind == "add":
                        entries[name] = ino
                    elif entries.get(name) == ino:
                        del entries[name]
                variants.append(entries)
            per_dir[d] = variants
        undurable = sorted(i for i in self.data if self.durable_data.get(i) != self.data[i])
        for kept_root in root_choices:
            visible = [d for d in self.dirs if d in self.durable_dirs or d in kept_root]
            for combo in itertools.product(*(per_dir[d] for d in visible)):
                for cut in ("empty", "half", "whole"):
                    state: dict[str, dict[str, bytes]] = {}
                    for d, entries in zip(visible, combo, strict=True):
                        files = {}
                        for name, ino in entries.items():
                            content = self.durable_data.get(ino, b"")
                            if ino in undurable:
                                whole = self.data[ino]
                                content = {"empty": b"", "half": whole[: len(whole) // 2], "whole": whole}[cut]
                            files[name] = content
                        state[d] = files
                    yield state
                    if not undurable:
                        break


def _digest(state: dict[str, dict[str, bytes]], *, visible_only: bool = False) -> str:
    """A digest of a state; with `visible_only`, of its revision files alone (readers never look at a
    temporary name, so two states that differ only there classify alike)."""
    h = hashlib.sha256()
    for d in sorted(state):
        h.update(b"D" + d.encode())
        for n in sorted(state[d]):
            if visible_only and not REV_RE.match(n):
                continue
            h.update(b"F" + n.encode() + hashlib.sha256(state[d][n]).digest())
    return h.hexdigest()


def _materialise(root: Path, state: dict[str, dict[str, bytes]]) -> None:
    root.mkdir()
    for d, files in state.items():
        (root / d).mkdir()
        for name, content in files.items():
            (root / d / name).write_bytes(content)


def _check_state(scratch: Path, state: dict[str, dict[str, bytes]], acks: list[Ack], world: str) -> list[str]:
    _materialise(scratch, state)
    try:
        pre = raw_holders(scratch, SEAT, SESSION)
        host_kw = {"host": OTHER_BOOT} if world == "rebooted" else {}
        probe = Probe(unit_world(acks, collected=(world == "collected")))
        restarter = make_store(scratch, pid=3000, liveness=Liveness(alive={3000}), **host_kw)  # type: ignore[arg-type]
        report = restarter.restart(SEAT, SESSION, probe)
        checked = check_restart(scratch, acks, report, pre,
                                rerun=lambda: restarter.restart(SEAT, SESSION, probe))
        if world == "rebooted":
            assert report.free, "after a reboot every claim of the old boot ends stopped with a boot proof"
        return checked.outcomes
    finally:
        shutil.rmtree(scratch)


def _prefixes(log: list[Entry]) -> Iterator[tuple[int, Model, list[Ack]]]:
    model = Model()
    acks: list[Ack] = []
    yield 0, model, list(acks)
    for i, entry in enumerate(log, 1):
        if isinstance(entry, Op):
            model.apply(entry)
            yield i, model, list(acks)
        else:
            acks.append(entry)


def test_crash_prefixes_process_crash_model(tmp_path: Path) -> None:
    """Every prefix of the operation log, as a process crash leaves it; restarted on the same boot with
    the unit alive, with the scope collected, and after a reboot (boot proof). States that differ only in
    temporary files are checked once (the first one met, temporary files included)."""
    log = record_scenario(tmp_path / "recorded")
    ops = [e for e in log if isinstance(e, Op)]
    # 16 publications (create, write, fsync, link, directory fsync, unlink), 2 key directories.
    assert len(ops) == 16 * 6 + 2 * 2, [o.kind for o in ops]
    outcomes = _process_crashes(tmp_path, log)
    assert {"free", "stopped-no-unit", "uncertain-unit", "uncertain-spawn-marker", "stop-in-progress",
            "release-completed", "stopped-boot-proof"} <= outcomes, outcomes


def _process_crashes(tmp_path: Path, log: list[Entry]) -> set[str]:
    """Check every prefix of `log` as a process crash leaves it, in three worlds; the outcomes seen."""
    seen: set[str] = set()
    outcomes: set[str] = set()
    for i, model, acks in _prefixes(log):
        state = model.process_crash_state()
        key = _digest(state, visible_only=True) + repr(sorted(acks))
        if key in seen:
            continue
        seen.add(key)
        for world in ("alive", "collected", "rebooted"):
            outcomes.update(_check_state(tmp_path / f"p{i}-{world}", state, acks, world))
    assert len(seen) > 20
    return outcomes


def test_crash_prefixes_power_loss_model(tmp_path: Path) -> None:
    """Every state the persistence model allows after every prefix: un-fsynced directory entries lost
    in any combination, un-fsynced data empty, cut in half or whole. Under the model a power loss never
    shows a reader anything a process crash at some prefix could not (with the same acknowledgements),
    and every distinct state passes the restart checks (same boot, unit as the acknowledgements imply)."""
    log = record_scenario(tmp_path / "recorded")
    generated, beyond_crash = _power_losses(tmp_path, log)
    # The model did produce states a process crash cannot (lost links, resurrected temporary files).
    assert beyond_crash > 100, (generated, beyond_crash)


def _power_losses(tmp_path: Path, log: list[Entry]) -> tuple[int, int]:
    """Check every state the power-loss model allows after every prefix of `log`; returns how many were
    generated and how many differ from the process-crash state of their prefix."""
    crash_views: set[str] = set()
    for _i, model, acks in _prefixes(log):
        crash_views.add(_digest(model.process_crash_state(), visible_only=True) + repr(sorted(acks)))
    generated = beyond_crash = 0
    checked: set[str] = set()
    for i, model, acks in _prefixes(log):
        crash = _digest(model.process_crash_state())
        for state in model.power_loss_states():
            generated += 1
            beyond_crash += _digest(state) != crash
            view = _digest(state, visible_only=True) + repr(sorted(acks))
            if view in checked:
                continue
            checked.add(view)
            assert view in crash_views, f"after op {i} a power loss shows a state no process crash can"
            _check_state(tmp_path / f"s{len(checked)}", state, acks, "alive")
    return generated, beyond_crash


def test_crash_prefixes_of_a_recovery(tmp_path: Path) -> None:
    """Both models over a recovery (§6 "Recover", K17, K18): a reservation with an eligibility, its
    take-over by a launcher (another store), the launcher's spawn marker, activation, stop and release,
    then a second reservation with an eligibility that nobody takes. Every owner is gone at the restart:
    a reservation still pending on both keys stays held (eligibility-pending), a half-done or finished
    take-over before the spawn marker is stopped with the no-unit observation, and the W5 checks hold
    (with the eligibility's own: fixed per claim, taken once per key, never a marker while pending)."""
    log = record_scenario(tmp_path / "recorded", _recoveries)
    ops = [e for e in log if isinstance(e, Op)]
    # 14 publications: reserve, take-over, spawn marker, active, stopping, stopped, reserve.
    assert len(ops) == 14 * 6 + 2 * 2, [o.kind for o in ops]
    assert [s for _, s in (e for e in log if not isinstance(e, Op))][:2] == ["acquire", "take-over"]
    (tmp_path / "crash").mkdir()
    (tmp_path / "power").mkdir()
    outcomes = _process_crashes(tmp_path / "crash", log)
    assert {"free", "eligibility-pending", "stopped-no-unit", "uncertain-unit", "uncertain-spawn-marker",
            "stop-in-progress", "release-completed", "stopped-boot-proof"} <= outcomes, outcomes
    generated, beyond_crash = _power_losses(tmp_path / "power", log)
    assert beyond_crash > 100, (generated, beyond_crash)
