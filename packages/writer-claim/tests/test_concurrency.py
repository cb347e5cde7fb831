"""Real concurrency: N processes racing for one pair (W1), and 8 processes hammering acquire/release on
the same pair while an independent reader watches the revision chains.

Runs are bounded by a deadline (a bound on the work, never an assertion about time). Every child is a
forked process of this test, waited for by its pid; a child that outlives its bound is killed by pid.
"""

from __future__ import annotations

import json
import os
import select
import time
from pathlib import Path
from typing import Any

from claim_helpers import (
    BINDING,
    SEAT,
    SESSION,
    cohort_proof,
    collect_children,
    fork_child,
    parse_raw,
    race,
    raw_chain,
    raw_records,
)

from mosaic.safe_open import ProcessRef
from mosaic.writer_claim import ClaimRefusal, ClaimStore


def _race_once(root: str) -> dict[str, str]:
    try:
        return {"won": ClaimStore(root).acquire(SEAT, SESSION, BINDING).claim_id}
    except ClaimRefusal as e:
        return {"refused": e.code}


def test_W1_n_processes_race_for_one_pair_exactly_one_wins(claim_root: Path) -> None:
    """W1: 8 processes acquire the same pair at once: exactly one claim; every other process refuses
    already-active; each key has exactly one revision, the winner's."""
    results = race(_race_once, str(claim_root))
    assert not [r for r in results if "error" in r], results
    winners = [r["won"] for r in results if "won" in r]
    assert len(winners) == 1, results
    assert sorted(r["refused"] for r in results if "refused" in r) == ["already-active"] * 7
    for key in (SEAT, SESSION):
        recs = raw_records(claim_root, key.dirname)
        assert [r["claimId"] for r in recs] == winners  # type: ignore[index]


_HAMMER_S = 2.0
_MIN_CYCLES = 3
_HAMMER_HARD_BOUND_S = 60.0


def _hammer(root: str, running_w: int) -> dict[str, Any]:
    """Loop full cycles on the pair for _HAMMER_S seconds, and past that only until the pair has seen
    _MIN_CYCLES whole cycles (so a slow machine still exercises something), never past the hard bound.
    `running_w` is held open while this child runs: the parent's reader watches until every copy closes."""
    os.nice(5)  # the watching reader must get the CPU it needs to observe often
    store = ClaimStore(root)
    start = time.monotonic()
    cycles: list[str] = []
    refusals: dict[str, int] = {}
    seat_dir = Path(root) / SEAT.dirname

    def more() -> bool:
        elapsed = time.monotonic() - start
        if elapsed < _HAMMER_S:
            return True
        done = len([n for n in os.listdir(seat_dir) if n.endswith(".json")]) // 5 if seat_dir.exists() else 0
        return done < _MIN_CYCLES and elapsed < _HAMMER_HARD_BOUND_S

    while more():
        try:
            c = store.acquire(SEAT, SESSION, BINDING)
        except ClaimRefusal as e:
            refusals[e.code] = refusals.get(e.code, 0) + 1
            os.sched_yield()  # let the holder progress (2 cores, 8 contenders)
            continue
        c.mark_spawn()
        c.activate(invocation_id=f"inv-{os.getpid()}", engine=ProcessRef(os.getpid(), 1))
        c.begin_stop(f"stop-{c.claim_id}")
        c.release(cohort_proof(c.claim_id))
        cycles.append(c.claim_id)
    os.close(running_w)
    return {"cycles": cycles, "refusals": refusals}


def _head(root: Path, dirname: str) -> tuple[int, dict[str, Any] | None]:
    """The highest revision of a key (0, None for none); the record parsed by the independent reader."""
    names = []
    try:
        names = [n for n in os.listdir(root / dirname) if n.startswith("r") and n.endswith(".json")]
    except FileNotFoundError:
        return 0, None
    if not names:
        return 0, None
    top = max(names)
    data = (root / dirname / top).read_bytes()
    # Complete means it parses whole; the full schema check runs over every chain afterwards.
    try:
        rec = json.loads(data)
    except ValueError:
        raise AssertionError(f"an incomplete revision is visible: {dirname}/{top}: {data[:80]!r}") from None
    return int(top[1:11]), rec


def _holder(rec: dict[str, Any] | None) -> str | None:
    if rec is None or (rec["state"] == "stopped" and rec["proof"] is not None):
        return None
    return str(rec["claimId"])


def test_hammer_8_processes_never_two_holders(claim_root: Path) -> None:
    """8 processes loop acquire -> spawn marker -> active -> stopping -> stopped on the same pair for a
    bounded time. An independent reader takes consistent snapshots of both chains (double collect: the
    seat head is unchanged across the read of the session head) and finds at most one holder in every one;
    every revision it reads is complete. Afterwards each chain is a sequence of whole, non-interleaved
    claims, and both chains hold the same claims in the same order."""
    running_r, running_w = os.pipe()
    children = [fork_child(_hammer, str(claim_root), running_w) for _ in range(8)]
    os.close(running_w)
    snapshots = held_snapshots = 0
    try:
        # The reader watches until every child has closed its copy of running_w (EOF on running_r).
        while not select.select([running_r], [], [], 0)[0]:
            n1, seat = _head(claim_root, SEAT.dirname)
            _, session = _head(claim_root, SESSION.dirname)
            n2, _ = _head(claim_root, SEAT.dirname)
            if n1 != n2:
                continue  # the seat chain moved during the read: not one instant
            snapshots += 1
            holders = {h for h in (_holder(seat), _holder(session)) if h is not None}
            assert len(holders) <= 1, f"two holders at one instant: {holders}"
            held_snapshots += bool(holders)
            os.sched_yield()
    finally:
        results = collect_children(children)
        os.close(running_r)
    assert not [r for r in results if "error" in r], results
    cycles = [c for r in results for c in r["cycles"]]
    refusal_codes = {code for r in results for code in r["refusals"]}
    assert refusal_codes <= {"already-active", "unsafe-replacement"}, refusal_codes
    assert len(cycles) >= _MIN_CYCLES and held_snapshots >= 1, (len(cycles), held_snapshots)
    print(f"hammer: {len(cycles)} cycles, {snapshots} consistent snapshots, {held_snapshots} with a holder, "
          f"refusals {sorted(refusal_codes)}")

    order: dict[str, list[str]] = {}
    for key in (SEAT, SESSION):
        chain = raw_chain(claim_root, key.dirname)
        assert [n for n, _ in chain] == list(range(1, len(chain) + 1))
        recs = [parse_raw(data) for _, data in chain]
        assert all(r is not None for r in recs)
        runs: list[list[dict[str, Any]]] = []
        for rec in recs:
            assert rec is not None
            if runs and runs[-1][0]["claimId"] == rec["claimId"]:
                runs[-1].append(rec)
            else:
                runs.append([rec])
        ids = [run[0]["claimId"] for run in runs]
        assert len(ids) == len(set(ids)), "a claim's revisions are interleaved with another claim's"
        for run in runs:
            assert [r["state"] for r in run] == ["reserved", "reserved", "active", "stopping", "stopped"]
            assert run[-1]["proof"] is not None
        order[key.kind] = ids
    assert order["seat"] == order["session"]
    assert sorted(order["seat"]) == sorted(cycles)
