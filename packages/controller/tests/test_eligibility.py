"""The single-use eligibility record (brief §6 "Recover": "it is single-use"; K17; mutant 24), on a real file
system in a temporary claim root: held once before a spawn, consumed only by a launch that passed its load
check (README "Faults": a torn write)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from mosaic.controller import ControlRefusal
from mosaic.controller.lifecycle import (
    EligibilityRecord,
    hold_record,
    mint_eligibility_id,
    read_record,
    record_state,
    settle_record,
    write_record,
)


def record(**changes: object) -> EligibilityRecord:
    base: dict[str, object] = dict(
        id=mint_eligibility_id(), claim_id="c" * 32, previous_claim_id="d" * 32, stop="s-1",
        proof_digest="sha256:" + "0" * 64,
        pins={"engine_version": "0.85.1", "binary_sha256": "sha256:" + "1" * 64, "argv_digest": "sha256:" + "2" * 64},
        session_id="019a-session", session_file="/tmp/x/s.jsonl", conversation="pi:abc", branch="main",
        leaf="a1b2c3d4", generation=2, incarnation="inc-1", issued_at=1.5)
    base.update(changes)
    return EligibilityRecord(**base)  # type: ignore[arg-type]


def refused(fn: object, *args: object) -> ControlRefusal:
    with pytest.raises(ControlRefusal) as info:
        fn(*args)  # type: ignore[operator]
    return info.value


def test_a_record_round_trips_and_its_digest_is_stable(tmp_path: Path) -> None:
    rec = record()
    write_record(str(tmp_path), rec)
    again = read_record(str(tmp_path), rec.id)
    assert again == rec and again.digest == rec.digest
    assert (tmp_path / "eligibility" / f"{rec.id}.json").stat().st_mode & 0o777 == 0o600
    assert record_state(str(tmp_path), rec.id) == "unused"


def test_an_id_is_written_once(tmp_path: Path) -> None:
    rec = record()
    write_record(str(tmp_path), rec)
    with pytest.raises(FileExistsError):
        write_record(str(tmp_path), record(id=rec.id, leaf="other"))
    assert read_record(str(tmp_path), rec.id).leaf == rec.leaf


def test_K17_an_eligibility_record_is_consumed_once(tmp_path: Path) -> None:
    """Mutant 24 (a record usable twice) fails here: a held record is refused to a second launcher, before
    and after its launch settles it."""
    rec = record()
    write_record(str(tmp_path), rec)
    hold_record(str(tmp_path), rec.id)
    assert record_state(str(tmp_path), rec.id) == "launching"
    second = refused(hold_record, str(tmp_path), rec.id)
    assert second.code == "eligibility" and "held by a launch" in second.message
    assert "held by a launch" in refused(read_record, str(tmp_path), rec.id).message
    settle_record(str(tmp_path), rec.id, passed=True)
    assert record_state(str(tmp_path), rec.id) == "used"
    third = refused(hold_record, str(tmp_path), rec.id)
    assert third.code == "eligibility" and "already used" in third.message
    assert "already used" in refused(read_record, str(tmp_path), rec.id).message


def test_torn_write_an_eligibility_is_consumed_only_by_a_launch_that_passed_its_load_check(tmp_path: Path) -> None:
    """The hold is single use, but only a passed load check makes the record `used`; a
    failed one leaves it `spent` (never read as launched, never usable again), and a record is settled once,
    only after a hold."""
    failed = record()
    write_record(str(tmp_path), failed)
    assert refused(lambda: settle_record(str(tmp_path), failed.id, passed=True)).code == "eligibility"  # not held: nothing to settle
    assert record_state(str(tmp_path), failed.id) == "unused"
    hold_record(str(tmp_path), failed.id)
    settle_record(str(tmp_path), failed.id, passed=False)
    assert record_state(str(tmp_path), failed.id) == "spent"
    again = refused(hold_record, str(tmp_path), failed.id)
    assert "spent by a launch that failed its load check" in again.message
    assert refused(lambda: settle_record(str(tmp_path), failed.id, passed=True)).code == "eligibility"  # settled once
    assert sorted(os.listdir(tmp_path / "eligibility")) == [f"{failed.id}.spent"]


def _race(claim_root: str, rid: str, n: int) -> tuple[list[int], list[str]]:
    wins: list[int] = []
    refusals: list[str] = []
    barrier = threading.Barrier(n)

    def go(i: int) -> None:
        barrier.wait()
        try:
            hold_record(claim_root, rid)
            wins.append(i)
        except ControlRefusal as r:
            refusals.append(r.code)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wins, refusals


def test_K17_racing_consumers_exactly_one_wins(tmp_path: Path) -> None:
    for _ in range(20):
        rec = record()
        write_record(str(tmp_path), rec)
        wins, refusals = _race(str(tmp_path), rec.id, 4)
        assert len(wins) == 1 and refusals == ["eligibility"] * 3


def test_unknown_malformed_and_foreign_records_are_refused(tmp_path: Path) -> None:
    assert refused(read_record, str(tmp_path), mint_eligibility_id()).code == "eligibility"
    assert refused(read_record, str(tmp_path), "../etc/passwd").code == "eligibility"
    rec = record()
    write_record(str(tmp_path), rec)
    path = tmp_path / "eligibility" / f"{rec.id}.json"
    body = json.loads(path.read_text())
    for broken in ({**body, "generation": 0}, {**body, "extra": 1}, {**body, "pins": {}}, {**body, "version": 2},
                   {**body, "id": mint_eligibility_id()}):
        path.write_text(json.dumps(broken))
        assert refused(read_record, str(tmp_path), rec.id).code == "eligibility"
    path.write_text("{")
    assert refused(read_record, str(tmp_path), rec.id).code == "eligibility"
    os.unlink(path)
    os.symlink("/etc/hostname", path)  # never followed
    assert refused(read_record, str(tmp_path), rec.id).code == "eligibility"
