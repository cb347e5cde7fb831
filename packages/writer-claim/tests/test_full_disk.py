"""A full disk does not stop a stop (brief §6: stopping before any signal, then stopped), on a real full
file system: a small tmpfs mounted for each test on a directory it made under /tmp, unmounted by that name
afterwards (no host mount is touched; it needs root and says so when it cannot mount). The claim reserves
room for its stop's revisions (`Claim.reserve_space`); on the full file system the stop's publications draw
on it and complete, an ordinary step never does, and a publication that finds no room left raises
`ClaimWriteError` naming the key, the step and ENOSPC, with nothing half-written."""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from claim_helpers import (
    BINDING,
    ENGINE,
    SEAT,
    SESSION,
    cohort_proof,
    cohort_ref,
    completeness_problems,
    make_store,
)

from mosaic.writer_claim import RESERVE_REVISIONS, Claim, ClaimStore, ClaimWriteError, State
from mosaic.writer_claim.internals import reserve_name


@pytest.fixture
def small_fs() -> Iterator[Path]:
    """A 1 MiB tmpfs on a fresh directory; yields the directory, unmounts it by that name."""
    mount = Path(tempfile.mkdtemp(prefix="mosaic-wcfull-", dir="/tmp"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        os.rmdir(mount)
        pytest.skip(f"a full disk needs a tmpfs of its own, and this user cannot mount one: {done.stderr.strip()}")
    try:
        (mount / "claims").mkdir()
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
        os.rmdir(mount)


def fill(mount: Path) -> None:
    """Write a filler file until the file system refuses a single byte."""
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1):
            while True:
                try:
                    if os.write(fd, b"\0" * size) < size:
                        break
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)


def must(step: Callable[[], object]) -> None:
    """A step that must publish: a ClaimWriteError is the failure under test, an assertion."""
    try:
        step()
    except ClaimWriteError as exc:
        pytest.fail(f"the publication drew no reserved room: {exc}")


def active_claim(store: ClaimStore) -> Claim:
    claim = store.acquire(SEAT, SESSION, BINDING)
    claim.reserve_space()
    claim.mark_spawn()
    claim.activate(invocation_id="inv-1", engine=ENGINE, cohort=cohort_ref(claim.claim_id, store.host, "inv-1"))
    return claim


def names(root: Path, dirname: str) -> list[str]:
    return sorted(os.listdir(root / dirname))


def test_disk_full_a_stop_publishes_every_revision_from_the_room_reserved_at_launch(small_fs: Path) -> None:
    root = small_fs / "claims"
    with make_store(root) as store:
        claim = active_claim(store)
        for key in (SEAT, SESSION):
            assert [n for n in names(root, key.dirname) if n.startswith(".reserve-")] == \
                [reserve_name(claim.claim_id, k) for k in range(1, RESERVE_REVISIONS + 1)]
        fill(small_fs)
        # An ordinary step never draws on the reserve: it fails, says where and why, and leaves the key as it was.
        with pytest.raises(ClaimWriteError) as info:
            claim.set_generation(2)
        assert info.value.errno == errno.ENOSPC and (info.value.key, info.value.step) == ("seat", "generation")
        assert str(info.value).startswith(f"the seat key ({SEAT.dirname}) could not be written: generation")
        assert "ENOSPC" in str(info.value)
        assert store.observe_key(SEAT).revision.state is State.ACTIVE  # type: ignore[union-attr]
        # The safety path does: uncertain, the stop's two phases, stopped with the proof, on both keys.
        must(claim.mark_uncertain)
        must(lambda: claim.begin_stop("stop-1", confirmation="conf-1", phase="term"))
        must(lambda: claim.begin_stop("stop-1", confirmation="conf-1", phase="kill"))
        must(lambda: claim.release(cohort_proof("stop-1")))
        pair = store.observe(SEAT, SESSION)
        for obs in pair.keys():
            assert obs.revision is not None and obs.revision.state is State.STOPPED
            assert obs.revision.proof == cohort_proof("stop-1")
        assert completeness_problems(root) == []
        for key in (SEAT, SESSION):  # no temporary file left, the claim's last reserve removed with its stop
            assert [n for n in names(root, key.dirname) if n.startswith(".")] == []


def test_disk_full_past_the_reserve_a_publication_names_the_key_and_leaves_nothing_half_written(
        small_fs: Path) -> None:
    root = small_fs / "claims"
    with make_store(root) as store:
        claim = active_claim(store)
        for key in (SEAT, SESSION):  # keep one reserve per key
            for k in range(2, RESERVE_REVISIONS + 1):
                os.unlink(root / key.dirname / reserve_name(claim.claim_id, k))
        fill(small_fs)
        must(claim.mark_uncertain)
        fill(small_fs)  # what the reserve's truncation to the revision's length gave back
        before = store.observe(SEAT, SESSION)
        with pytest.raises(ClaimWriteError) as info:
            claim.begin_stop("stop-1", confirmation="conf-1", phase="term")
        assert (info.value.errno, info.value.key, info.value.step) == (errno.ENOSPC, "seat", "stopping")
        assert SEAT.dirname in str(info.value) and "ENOSPC" in str(info.value)
        assert store.observe(SEAT, SESSION) == before  # both keys still uncertain, nothing half-written
        assert completeness_problems(root) == []
        assert [n for n in names(root, SEAT.dirname) if n.startswith(".tmp-")] == []
