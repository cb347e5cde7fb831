"""Finding a key's head without listing its chain (README "Finding the head").

The store finds the highest revision by existence checks (lstat of r<n>.json) from the head it last saw on
that key: two checks when nothing changed, galloping and bisecting when another writer moved on (a stale
start) or for the store's first look (no start), and the listing only where the checks contradict a
gap-free chain (the start is gone, or r1 is): damage, decided by the highest name present.

The store's `os` is wrapped by a counter here (the same seam the crash-prefix test records through), so
the tests assert how many checks and listings a lookup made: counts, never times. Every lookup is also
compared with the listing (`raw_chain`), the definition of the head. The crash tests (test_crash_real,
test_crash_prefix) check the same equality after every crash state (claim_helpers.check_restart), and
test_concurrency's hammer runs 8 long-lived stores whose starts go stale at every cycle of the others.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from claim_helpers import (
    BINDING,
    SEAT,
    SESSION,
    make_store,
    raw_chain,
    raw_holders,
    run_lifecycle,
    write_raw,
    write_revision,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.writer_claim import ClaimStore, State

# The counter wraps the `os` of the store's modules: the point is the store's own file-system calls.
from mosaic.writer_claim.internals import store_os


class CountingOS:
    """Stands in for `os` inside the claim store (`store_os`): every call is the real one; stat and listdir
    are counted."""

    def __init__(self) -> None:
        self.stats = 0
        self.listings = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def stat(self, *args: Any, **kwargs: Any) -> os.stat_result:
        self.stats += 1
        return os.stat(*args, **kwargs)

    def listdir(self, *args: Any) -> list[str]:
        self.listings += 1
        return os.listdir(*args)


@contextmanager
def counting() -> Iterator[CountingOS]:
    counter = CountingOS()
    with store_os(counter):
        yield counter


def listed_head(root: Path, dirname: str) -> int:
    chain = raw_chain(root, dirname)
    return chain[-1][0] if chain else 0


def fresh_bound(n: int) -> int:
    """Existence checks a first look at a gap-free chain of n revisions may make: r1, the gallop (one per
    doubling) and the bisection (one per halving)."""
    return 1 + 2 * (math.ceil(math.log2(n + 1)) + 1)


def grow(root: Path, dirname: str, upto: int) -> None:
    """Extend a key's chain to `upto` with placeholder revisions (hard links of one file: cheap). Only a
    head is ever read; a placeholder head reads as unreadable, which is fine for counting lookups."""
    d = root / dirname
    d.mkdir(exist_ok=True)
    have = listed_head(root, dirname)
    if have >= upto:
        return
    filler = d / ".filler"
    if not filler.exists():
        filler.write_bytes(b"{}")
    for n in range(have + 1, upto + 1):
        os.link(filler, d / f"r{n:010d}.json")


def history(root: Path, cycles: int) -> None:
    """`cycles` whole claim cycles of history on (SEAT, SESSION): one real lifecycle, placeholders, and a
    real stopped head at 5 * cycles on each key (so the pair is free and acquirable)."""
    store = make_store(root, pid=2000)
    run_lifecycle(store, lambda c, s: None)
    heads = {k: store.observe_key(k).revision for k in (SEAT, SESSION)}
    for key, rev in heads.items():
        assert rev is not None and rev.state is State.STOPPED
        grow(root, key.dirname, 5 * cycles - 1)
        write_revision(root, rev.evolve(number=5 * cycles))


@settings(max_examples=60, deadline=None, database=None)
@given(n=st.integers(0, 600), seen=st.integers(0, 600), extra=st.integers(0, 600))
def test_any_gap_free_chain_from_any_start_finds_the_listed_head_without_listing(n: int, seen: int,
                                                                                  extra: int) -> None:
    """A store that saw the chain at `seen` revisions (0: never looked), then other writers moved it on by
    `extra`: the lookup equals the listing's highest name, lists nothing (but for an empty directory,
    whose listing is empty), and makes at most the checks of a gallop and a bisection over the distance
    moved; nothing moved costs exactly two checks."""
    seen = min(seen, n)
    with tempfile.TemporaryDirectory(prefix="head-lookup-") as tmp:
        root = Path(tmp)
        store = make_store(root, pid=2000)
        grow(root, SEAT.dirname, seen)
        if seen:
            assert store.observe_key(SEAT).head_number == seen
        total = max(seen, n + extra)
        grow(root, SEAT.dirname, total)
        with counting() as c:
            found = store.observe_key(SEAT).head_number
        assert found == listed_head(root, SEAT.dirname) == total
        assert c.listings == (1 if total == 0 else 0)
        if seen and total == seen:
            assert c.stats == 2  # r<seen> is there and r<seen+1> is not
        elif total:
            assert c.stats <= fresh_bound(total - seen) + 1, (c.stats, seen, total)
        with counting() as c:  # and again, nothing moved: O(1)
            assert store.observe_key(SEAT).head_number == total
        assert (c.stats, c.listings) == ((2, 0) if total else (1, 1))


def test_a_warm_store_finds_both_heads_with_four_checks_at_any_history(claim_root: Path) -> None:
    """A lookup's cost does not grow with the history (a listing, which parses every name, would): a
    whole claim cycle on a long-lived store makes the same checks and no listing, after 2 cycles of
    history and after 2,000 (10,000 revisions per key)."""
    history(claim_root, 2)
    store = make_store(claim_root, pid=3000)
    per_cycle = []
    for cycles in (2, 2000):
        if cycles > 2:
            for key in (SEAT, SESSION):
                head = store.observe_key(key).revision
                assert head is not None
                grow(claim_root, key.dirname, 5 * cycles - 1)
                write_revision(claim_root, head.evolve(number=5 * cycles))
        store.observe(SEAT, SESSION)  # the store catches up once (a gallop), then:
        with counting() as c:
            run_lifecycle(store, lambda c, s: None)
        assert c.listings == 0
        per_cycle.append(c.stats)
        with counting() as c:
            pair = store.observe(SEAT, SESSION)
        assert (c.stats, c.listings) == (4, 0)
        assert pair.seat.head_number == listed_head(claim_root, SEAT.dirname) == 5 * cycles + 5
        assert pair.session.head_number == listed_head(claim_root, SESSION.dirname) == 5 * cycles + 5
    assert per_cycle[0] == per_cycle[1] == 4, per_cycle  # acquire's observe: r<h>, r<h+1> on each key


def test_a_fresh_store_at_10000_revisions_makes_a_logarithmic_number_of_checks(claim_root: Path) -> None:
    """No start (a new process, a restart after a crash): a gallop and a bisection, no listing, and the
    pair is acquired at the right numbers."""
    history(claim_root, 2000)
    with counting() as c:
        claim = make_store(claim_root, pid=3000).acquire(SEAT, SESSION, BINDING)
    assert c.listings == 0
    assert c.stats <= 2 * fresh_bound(10_000) + 2, c.stats
    assert claim.head("seat").number == claim.head("session").number == 10_001
    assert raw_holders(claim_root, SEAT, SESSION) == {claim.claim_id}


def test_a_stale_start_after_another_writer_published_finds_its_revisions(claim_root: Path) -> None:
    """Two long-lived stores take turns on the pair: each one's start is stale by the other's cycle (and
    once by 200 more), each lookup still finds the other's stopped head, each acquisition links the next
    number, and neither ever lists."""
    a, b = make_store(claim_root, pid=2000), make_store(claim_root, pid=2001)
    for i in range(6):
        store = (a, b)[i % 2]
        if i == 4:
            for key in (SEAT, SESSION):
                head = store.observe_key(key).revision
                assert head is not None
                grow(claim_root, key.dirname, head.number + 199)
                write_revision(claim_root, head.evolve(number=head.number + 200))
        before = listed_head(claim_root, SEAT.dirname)
        with counting() as c:
            claim_id = run_lifecycle(store, lambda c, s: None, tag=str(i))
        assert c.listings == 0
        chain = raw_chain(claim_root, SEAT.dirname)
        assert [n for n, _ in chain] == list(range(1, len(chain) + 1))
        assert len(chain) == before + 5 and raw_holders(claim_root, SEAT, SESSION) == set()
        assert store.observe_key(SESSION).revision.claim_id == claim_id  # type: ignore[union-attr]


@pytest.mark.parametrize("damage", ["chain-cut-below-the-start", "r1-removed", "key-dir-replaced"])
def test_a_start_the_chain_contradicts_falls_back_to_the_listing(claim_root: Path, damage: str) -> None:
    """Damage out of the model (revisions removed by hand, a key directory replaced): the start is gone or
    r1 is, so the listing decides (the definition of the head), and the store starts from what it found."""
    store = make_store(claim_root, pid=2000)
    for i in range(3):
        run_lifecycle(store, lambda c, s: None, tag=str(i))
    assert store.observe_key(SEAT).head_number == 15
    d = claim_root / SEAT.dirname
    if damage == "chain-cut-below-the-start":
        for n in range(9, 16):
            os.unlink(d / f"r{n:010d}.json")
        expected = 8
    elif damage == "r1-removed":
        os.unlink(d / "r0000000001.json")
        store = make_store(claim_root, pid=2001)  # no start: r1 is checked first
        expected = 15
    else:
        shutil.rmtree(d)
        d.mkdir()
        write_raw(claim_root, SEAT.dirname, 1, b"{}")
        write_raw(claim_root, SEAT.dirname, 2, b"{}")
        expected = 2
    with counting() as c:
        found = store.observe_key(SEAT).head_number
    assert found == listed_head(claim_root, SEAT.dirname) == expected
    assert c.listings == 1
    with counting() as c:
        assert store.observe_key(SEAT).head_number == expected
    assert (c.stats, c.listings) == (2, 0)


def test_an_existence_check_that_errs_falls_back_to_the_listing(claim_root: Path) -> None:
    """An lstat failing with anything but ENOENT (EACCES on a directory without search permission, EIO)
    does not count as absent: the listing decides. (It fails from r3 on here: counted as absent, the head
    would be r2.)"""
    run_lifecycle(make_store(claim_root, pid=2000), lambda c, s: None)
    store = make_store(claim_root, pid=2001)

    class Failing(CountingOS):
        def stat(self, *args: Any, **kwargs: Any) -> os.stat_result:
            self.stats += 1
            if args[0] not in ("r0000000001.json", "r0000000002.json"):
                raise PermissionError(13, "Permission denied")
            return os.stat(*args, **kwargs)

    failing = Failing()
    with store_os(failing):
        pair = store.observe(SEAT, SESSION)
    assert pair.seat.head_number == pair.session.head_number == 5 and failing.listings == 2
    assert pair.free


def test_the_empty_and_missing_key_cases(claim_root: Path) -> None:
    """A key directory that does not exist is an empty chain (no lookup); one that exists with no revision
    (a crash after key-dir-created) is an empty chain too, by its (empty) listing."""
    store = ClaimStore(claim_root)
    try:
        with counting() as c:
            assert store.observe_key(SEAT).head_number == 0
        assert (c.stats, c.listings) == (0, 0)
        (claim_root / SEAT.dirname).mkdir()
        with counting() as c:
            assert store.observe_key(SEAT).head is None
        assert (c.stats, c.listings) == (1, 1)
    finally:
        store.close()
