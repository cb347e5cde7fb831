"""The revision record: names, fields, JSON Schema, strict reading, identity defaults, README tables."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from claim_helpers import (
    BINDING,
    HOST,
    SEAT,
    SESSION,
    VALIDATOR,
    cohort_proof,
    fake_process,
    make_store,
    raw_chain,
    raw_records,
    run_lifecycle,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.safe_open import SafeOpenRefusal
from mosaic.writer_claim import (
    FORMAT,
    Binding,
    ClaimRefusal,
    ClaimStore,
    EngineIdentity,
    HostIdentity,
    Outcome,
    Owner,
    Pins,
    ProofKind,
    ProofRef,
    RecordError,
    Revision,
    SeatKey,
    SessionKey,
    State,
    StopInfo,
    Writer,
    current_process,
    decode_revision,
    encode_revision,
    revision_name,
    revision_to_json,
    unit_name_for,
)

README = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3]) / "packages/writer-claim/README.md"


def test_revision_names_are_r_and_ten_digits_starting_at_one(claim_root: Path) -> None:
    run_lifecycle(make_store(claim_root), lambda c, s: None)
    for key in (SEAT, SESSION):
        names = sorted(os.listdir(claim_root / key.dirname))
        assert names == [f"r{n:010d}.json" for n in range(1, 6)]
    assert revision_name(1) == "r0000000001.json"
    with pytest.raises(ValueError):
        revision_name(0)


def test_every_section_2_field_is_recorded(claim_root: Path) -> None:
    """§2 "Fields": key, claim ID, binding ID; harness, conversation, branch and leaf at launch; the pins;
    host and boot; owner pid, start time and incarnation token; the intended unit name (recorded before
    anything is spawned); invocation ID and engine pid and start time once known; generation; state; the
    proof reference. Every revision validates against the package's JSON Schema."""
    store = make_store(claim_root, pid=2000)
    c = store.acquire(SEAT, SESSION, BINDING, generation=3)
    first = raw_records(claim_root, SEAT.dirname)[0]
    assert first is not None
    assert first["unitName"] == unit_name_for(first["claimId"]) == c.unit_name
    assert first["spawnMarker"] is False and first["engine"] is None and first["invocationId"] is None
    assert re.fullmatch(r"cohort-claim-[0-9a-f]{32}\.scope", first["unitName"])
    c.mark_spawn()
    c.activate(invocation_id="0123abcd", engine=EngineIdentity(4242, 99))
    c.begin_stop("stop-1", confirmation="conf-1", phase="kill")
    c.release(cohort_proof("stop-1"))
    for key, kind in ((SEAT, "seat"), (SESSION, "session")):
        for n, data in raw_chain(claim_root, key.dirname):
            rec = json.loads(data)
            assert VALIDATOR.is_valid(rec), list(VALIDATOR.iter_errors(rec))
            assert data.endswith(b"\n") and rec["revision"] == n and rec["key"] == kind
            assert rec["format"] == FORMAT
            assert rec["seat"] == {"seat": SEAT.seat, "project": SEAT.project, "workspace": SEAT.workspace}
            assert rec["session"] == {"harness": "pi", "sessionId": SESSION.session_id}
            assert rec["claimId"] == c.claim_id
            assert (rec["bindingId"], rec["harness"], rec["conversation"], rec["branch"], rec["leaf"]) == (
                "binding-1", "pi", "pi-conversation-1", "main", "leaf-1")
            assert rec["pins"] == {"engineVersion": "0.85.1", "binarySha256": "ab" * 32,
                                   "argvDigest": "sha256:" + "cd" * 32}
            assert rec["host"] == {"machineId": HOST.machine_id, "bootId": HOST.boot_id}
            assert rec["owner"] == {"pid": 2000, "startTime": 12000, "pidNamespace": "pid:[test]",
                                    "incarnation": "inc-2000"}
            assert rec["generation"] == 3
    last = raw_records(claim_root, SEAT.dirname)[-1]
    assert last is not None
    assert last["invocationId"] == "0123abcd" and last["engine"] == {"pid": 4242, "startTime": 99}
    assert last["stop"] == {"stopId": "stop-1", "confirmation": "conf-1", "phase": "kill"}
    assert last["state"] == "stopped" and last["proof"]["kind"] == "cohort-proof"
    assert last["proof"]["digest"] == cohort_proof("stop-1").digest


def test_default_identity_comes_from_the_kernel(claim_root: Path) -> None:
    """Host identity from /etc/machine-id and the boot ID; the owner's pid and its start time from
    /proc/self/stat field 22."""
    store = ClaimStore(claim_root)
    assert store.host.machine_id == Path("/etc/machine-id").read_text().strip()
    assert store.host.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    stat = Path("/proc/self/stat").read_text()
    assert store.process.pid == os.getpid()
    assert store.process.start_time == int(stat.rsplit(")", 1)[1].split()[19])
    assert store.process.pid_namespace == os.readlink("/proc/self/ns/pid")
    assert current_process() == store.process
    c = store.acquire(SEAT, SESSION, BINDING)
    assert c.head("seat").owner.process == store.process


def test_claim_root_is_opened_beneath_a_held_fd(tmp_path: Path) -> None:
    """The claim root is resolved once by safe-open; a missing root, or a key directory that is a
    symlink, is refused by safe-open rather than followed."""
    with pytest.raises(SafeOpenRefusal) as e:
        ClaimStore(tmp_path / "missing")
    assert e.value.code == "unavailable"
    root = tmp_path / "claims"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / SEAT.dirname)
    with pytest.raises(SafeOpenRefusal) as e:
        make_store(root).acquire(SEAT, SESSION, BINDING)
    assert e.value.code == "unsafe-path"
    assert os.listdir(elsewhere) == []
    # The root is held: renaming the path away does not move the store.
    real = tmp_path / "real"
    real.mkdir()
    store = make_store(real)
    os.rename(real, tmp_path / "moved")
    real.mkdir()
    store.acquire(SEAT2 := SeatKey("s2", "p", "w"), SESSION, BINDING)
    assert os.listdir(real) == [] and (tmp_path / "moved" / SEAT2.dirname).is_dir()


@pytest.mark.parametrize("kind", ["sigterm", "eof", "agent_settled", "disconnect", "idle", "abort-ack", ""])
def test_only_three_proof_kinds_allow_stopped(kind: str) -> None:
    """§2 "What never releases a claim": none of these can be a proof reference."""
    with pytest.raises(ValueError):
        ProofRef(kind, "sha256:" + "0" * 64)  # type: ignore[arg-type]
    assert {k.value for k in ProofKind} == {"cohort-proof", "boot-proof", "no-unit"}


def _revision(**changes: object) -> Revision:
    claim_id = "claim-" + "a" * 32
    owner = Owner(fake_process(5), "inc")
    base = Revision(
        key="seat", number=1, seat=SEAT, session=SESSION, claim_id=claim_id, state=State.RESERVED,
        binding=BINDING, host=HOST, owner=owner, writer=Writer(owner.process, "inc", "owner"),
        unit_name=unit_name_for(claim_id), spawn_marker=False, invocation_id=None, engine=None,
        generation=1, stop=None, proof=None, reason="reserve", published_at="2026-01-01T00:00:00.000Z",
    )
    return base.evolve(**changes)


def test_strict_reading_refuses_anything_but_the_exact_format() -> None:
    rev = _revision()
    data = encode_revision(rev)
    assert decode_revision(data, key="seat", dirname=SEAT.dirname, number=1) == rev
    obj = revision_to_json(rev)
    cases = {
        "extra": {**obj, "extra": 1},
        "missing": {k: v for k, v in obj.items() if k != "owner"},
        "format": {**obj, "format": "other/1"},
        "state": {**obj, "state": "released"},
        "unit": {**obj, "unitName": "cohort-other.scope"},
        "claim": {**obj, "claimId": "claim-XYZ"},
        "proof-on-reserved": {**obj, "proof": {"kind": "no-unit", "digest": "sha256:" + "0" * 64, "detail": {}}},
        "bool-pid": {**obj, "owner": {**obj["owner"], "pid": True}},  # type: ignore[dict-item]
    }
    for name, bad in cases.items():
        raw = json.dumps(bad, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        with pytest.raises(RecordError):
            decode_revision(raw, key="seat", dirname=SEAT.dirname, number=1)
        assert not VALIDATOR.is_valid(bad) or name in ("unit", "bool-pid"), name
    with pytest.raises(RecordError):
        decode_revision(data, key="session", dirname=SESSION.dirname, number=1)  # another chain
    with pytest.raises(RecordError):
        decode_revision(data, key="seat", dirname=SEAT.dirname, number=2)  # another number
    with pytest.raises(RecordError):
        decode_revision(data, key="seat", dirname="seat-" + "0" * 64, number=1)  # another key's directory


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                min_size=1, max_size=20)


@settings(max_examples=60, deadline=None, database=None)
@given(
    seat=st.builds(SeatKey, _text, _text, _text),
    session=st.builds(SessionKey, st.just("pi"), _text),
    state=st.sampled_from(list(State)),
    marker=st.booleans(),
    number=st.integers(1, 9_999_999_999),
    generation=st.integers(1, 2**40),
    leaf=st.none() | _text,
    detail=st.dictionaries(_text, st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _text, max_size=4),
)
def test_round_trip_and_schema(seat: SeatKey, session: SessionKey, state: State, marker: bool, number: int,
                               generation: int, leaf: str | None, detail: dict[str, object]) -> None:
    """Any revision the model accepts encodes canonically, reads back equal, and is schema-valid."""
    proof = ProofRef(ProofKind.COHORT, "sha256:" + "1" * 64, detail) if state is State.STOPPED else None  # type: ignore[arg-type]
    stop = StopInfo("s", None, "p") if state is State.STOPPING else None
    binding = Binding("b", "pi", "c", "main", leaf, Pins("v", "x", "y"))
    rev = _revision(key="session", seat=seat, session=session, state=state, spawn_marker=marker, number=number,
                    generation=generation, binding=binding, proof=proof, stop=stop,
                    engine=EngineIdentity(1, 2) if marker else None)
    data = encode_revision(rev)
    assert decode_revision(data, key="session", dirname=session.dirname, number=number) == rev
    assert VALIDATOR.is_valid(json.loads(data))


def test_model_refuses_incoherent_revisions() -> None:
    with pytest.raises(ValueError):
        _revision(state=State.STOPPING)  # stopping without its stop record
    with pytest.raises(ValueError):
        _revision(proof=cohort_proof())  # a proof on a reserved revision
    with pytest.raises(ValueError):
        _revision(unit_name="cohort-claim-" + "b" * 32 + ".scope")  # not derived from the claim ID
    with pytest.raises(ValueError):
        HostIdentity("", "boot")


def _readme_table(title: str) -> dict[str, str]:
    """The rows of the README table under the heading `title`: first cell (backticks stripped) -> second."""
    text = README.read_text()
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def test_readme_refusal_table_matches_the_code_table() -> None:
    rows = _readme_table("Refusals")
    assert set(rows) == set(ClaimRefusal.CODES)
    for code, reconcile in ClaimRefusal.CODES.items():
        assert rows[code] == str(reconcile).lower(), code


def test_readme_outcome_table_matches_the_enum() -> None:
    assert set(_readme_table("Restart classification")) == {o.value for o in Outcome}


def test_readme_record_format_lists_every_field(claim_root: Path) -> None:
    c = make_store(claim_root).acquire(SEAT, SESSION, BINDING)
    documented = set(_readme_table("Record format"))
    assert documented == set(revision_to_json(c.head("seat")))
