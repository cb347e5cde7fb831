"""The revision record: names, fields, the cohort reference, JSON Schema, strict reading, the clock,
identity defaults, README tables."""

from __future__ import annotations

import copy
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
from claim_helpers import (
    BINDING,
    ENGINE,
    HOST,
    SEAT,
    SESSION,
    VALIDATOR,
    cohort_proof,
    cohort_ref,
    make_revision,
    make_store,
    raw_chain,
    raw_records,
    run_lifecycle,
    tree_bytes,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.safe_open import (
    HostIdentity,
    ProcessRef,
    SafeOpenRefusal,
    canonical_json,
    current_host,
    read_stat,
)
from mosaic.writer_claim import (
    Binding,
    ClaimRefusal,
    ClaimStore,
    Outcome,
    Pins,
    ProofKind,
    ProofRef,
    SeatKey,
    SessionKey,
    State,
)
from mosaic.writer_claim.internals import (
    FORMAT,
    FORMAT_ELIGIBILITY,
    FORMAT_ENGINE_UID,
    MAX_REVISION_BYTES,
    RecordError,
    decode_revision,
    encode_revision,
    revision_name,
    revision_to_json,
    unit_name_for,
)
from mosaic.writer_claim.model import MAX_COHORT_BYTES, Eligibility, Owner, ProcessIdentity, StopInfo, Writer

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
    anything is spawned); invocation ID and engine pid and start time once known, with the launcher's
    cohort reference; generation; state; the proof reference. Every revision validates against
    the package's JSON Schema."""
    store = make_store(claim_root, pid=2000)
    c = store.acquire(SEAT, SESSION, BINDING, generation=3)
    first = raw_records(claim_root, SEAT.dirname)[0]
    assert first is not None
    assert first["unitName"] == unit_name_for(first["claimId"]) == c.unit_name
    assert first["spawnMarker"] is False and first["engine"] is None and first["invocationId"] is None
    assert first["cohort"] is None
    assert re.fullmatch(r"cohort-claim-[0-9a-f]{32}\.scope", first["unitName"])
    c.mark_spawn()
    cohort = cohort_ref(c.claim_id, HOST, "0123abcd")
    c.activate(invocation_id="0123abcd", engine=ENGINE, cohort=cohort)
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
            assert rec["host"] == {"machineId": HOST.machine_id, "bootId": HOST.boot_id} == HOST.to_dict()
            assert rec["owner"] == {"pid": 2000, "startTime": 12000, "pidNamespace": "pid:[test]",
                                    "incarnation": "inc-2000"}
            assert rec["generation"] == 3
    last = raw_records(claim_root, SEAT.dirname)[-1]
    assert last is not None
    assert last["invocationId"] == "0123abcd" and last["engine"] == {"pid": 4242, "startTime": 99}
    assert last["cohort"] == cohort
    assert last["stop"] == {"stopId": "stop-1", "confirmation": "conf-1", "phase": "kill"}
    assert last["state"] == "stopped" and last["proof"]["kind"] == "cohort-proof"
    assert last["proof"]["digest"] == cohort_proof("stop-1").digest


def test_default_identity_comes_from_the_kernel(claim_root: Path) -> None:
    """Host identity from /etc/machine-id and the boot ID (dashes removed: safe-open's one form, which
    the cohort records too); the owner's pid and its start time from /proc/self/stat field 22."""
    store = ClaimStore(claim_root)
    assert store.host.machine_id == Path("/etc/machine-id").read_text().strip()
    assert store.host.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")
    assert store.host == current_host()
    stat = Path("/proc/self/stat").read_text()
    assert store.process.pid == os.getpid()
    assert store.process.start_time == int(stat.rsplit(")", 1)[1].split()[19])
    assert store.process.pid_namespace == os.readlink("/proc/self/ns/pid")
    assert store.process.ref == read_stat("self").ref  # type: ignore[union-attr]
    c = store.acquire(SEAT, SESSION, BINDING)
    assert c.head("seat").owner.process == store.process
    assert raw_records(claim_root, SEAT.dirname)[0]["host"] == current_host().to_dict()  # type: ignore[index]


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


@pytest.mark.parametrize("swap", ["symlink-elsewhere", "new-directory", "removed"])
def test_a_key_directory_swapped_after_use_is_opened_again_beneath_the_root(tmp_path: Path, swap: str) -> None:
    """The store keeps the fds of the key directories it used, but uses one only while the name beneath the
    held root still names that very directory (same device and inode): a key directory renamed away after
    the store used it, and replaced by a symlink, a new directory or nothing, is looked up again through
    safe-open, as a store that held nothing would. The moved directory never receives another revision; a
    symlink is refused (unsafe-path) and its target stays empty; a new directory receives the next
    revision; a removed one is made again and receives it."""
    root = tmp_path / "claims"
    root.mkdir()
    store = make_store(root)
    c = store.acquire(SEAT, SESSION, BINDING)
    moved = root / "moved"
    os.rename(root / SEAT.dirname, moved)
    before = sorted(os.listdir(moved))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if swap == "symlink-elsewhere":
        os.symlink(elsewhere, root / SEAT.dirname)
        with pytest.raises(SafeOpenRefusal) as e:
            c.mark_spawn()
        assert e.value.code == "unsafe-path"
        assert os.listdir(elsewhere) == []
    else:
        if swap == "new-directory":
            (root / SEAT.dirname).mkdir()
        c.mark_spawn()  # what a new Root.open_dir would do: the name's directory (made again when gone)
        assert sorted(os.listdir(root / SEAT.dirname)) == ["r0000000002.json"]
        assert raw_records(root, SEAT.dirname)[-1]["spawnMarker"] is True  # type: ignore[index]
    assert sorted(os.listdir(moved)) == before
    store.close()


def test_a_store_holds_a_bounded_number_of_key_directories_and_closes_them(tmp_path: Path) -> None:
    """A controller sees many pairs over its life: the store holds the fds of at most 16 key directories
    (the oldest closed first), and `close` closes every one it holds."""
    root = tmp_path / "claims"
    root.mkdir()
    fds_before = set(os.listdir("/proc/self/fd"))
    store = make_store(root)
    for i in range(20):
        store.acquire(SeatKey(f"s{i}", "p", "w"), SessionKey("pi", f"session-{i}"), BINDING)
    held = {os.readlink(f"/proc/self/fd/{fd}") for fd in set(os.listdir("/proc/self/fd")) - fds_before
            if os.path.exists(f"/proc/self/fd/{fd}")}
    keys = {p for p in held if os.path.dirname(p) == os.path.realpath(root)}
    assert 0 < len(keys) <= 16
    store.close()
    assert set(os.listdir("/proc/self/fd")) - fds_before == set()


@pytest.mark.parametrize("kind", ["sigterm", "eof", "agent_settled", "disconnect", "idle", "abort-ack", ""])
def test_only_three_proof_kinds_allow_stopped(kind: str) -> None:
    """§2 "What never releases a claim": none of these can be a proof reference."""
    with pytest.raises(ValueError):
        ProofRef(kind, "sha256:" + "0" * 64)  # type: ignore[arg-type]
    assert {k.value for k in ProofKind} == {"cohort-proof", "boot-proof", "no-unit"}


@pytest.mark.parametrize("digest", ["sha256:" + "A" * 64, "sha256:" + "0" * 63, "sha512:" + "0" * 64,
                                    "0" * 64, "sha256:" + "0" * 64 + "\n", ""])
def test_a_proof_digest_is_the_shared_sha256_form(digest: str) -> None:
    """A proof reference names its proof by safe-open's one digest form, `sha256:` and 64 lowercase hex
    (a cohortProof's verification digest is what a claim stores)."""
    with pytest.raises(ValueError):
        ProofRef(ProofKind.COHORT, digest)
    assert ProofRef(ProofKind.COHORT, "sha256:" + "0" * 64).digest == "sha256:" + "0" * 64


_revision = make_revision


def test_strict_reading_refuses_anything_but_the_exact_format() -> None:
    rev = _revision()
    data = encode_revision(rev)
    assert decode_revision(data, key="seat", dirname=SEAT.dirname, number=1) == rev
    obj = revision_to_json(rev)
    cases = {
        "extra": {**obj, "extra": 1},
        "missing": {k: v for k, v in obj.items() if k != "owner"},
        "missing-cohort": {k: v for k, v in obj.items() if k != "cohort"},
        "format": {**obj, "format": "other/1"},
        "format-1": {k: v for k, v in obj.items() if k != "cohort"} | {"format": "mosaic-writer-claim/1"},
        "cohort-array": {**obj, "cohort": [1, 2]},
        "host-with-dashes": {**obj, "host": {"machineId": HOST.machine_id,
                                             "bootId": "11111111-1111-4111-8111-111111111111"}},
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
    # A NaN in the cohort (Python's json writes it; it is not JSON) and brackets nested past what the
    # parser recurses (damage) are unreadable too, never an exception out of the reader.
    nan = json.dumps({**obj, "cohort": {"x": math.nan}}, sort_keys=True, separators=(",", ":")).encode()
    deep = b"[" * (MAX_REVISION_BYTES // 2) + b"]" * (MAX_REVISION_BYTES // 2)
    for raw in (nan + b"\n", deep):
        with pytest.raises(RecordError):
            decode_revision(raw, key="seat", dirname=SEAT.dirname, number=1)
    with pytest.raises(RecordError):
        decode_revision(data, key="session", dirname=SESSION.dirname, number=1)  # another chain
    with pytest.raises(RecordError):
        decode_revision(data, key="seat", dirname=SEAT.dirname, number=2)  # another number
    with pytest.raises(RecordError):
        decode_revision(data, key="seat", dirname="seat-" + "0" * 64, number=1)  # another key's directory


# A /2 revision exactly as a writer without the eligibility field makes it (built by hand here, not by this
# codec): the reserved revision `_revision()` stands for.
_FORMAT_2_REVISION: dict[str, Any] = {
    "format": "mosaic-writer-claim/2", "key": "seat", "revision": 1,
    "seat": {"seat": "seat-a", "project": "/fixtures/project", "workspace": "main"},
    "session": {"harness": "pi", "sessionId": "01a22a58-944f-7072-a9ab-f808835fc6a2"},
    "claimId": "claim-" + "a" * 32, "state": "reserved", "bindingId": "binding-1", "harness": "pi",
    "conversation": "pi-conversation-1", "branch": "main", "leaf": "leaf-1",
    "pins": {"engineVersion": "0.85.1", "binarySha256": "ab" * 32, "argvDigest": "sha256:" + "cd" * 32},
    "host": HOST.to_dict(),
    "owner": {"pid": 5, "startTime": 10005, "pidNamespace": "pid:[test]", "incarnation": "inc"},
    "writer": {"pid": 5, "startTime": 10005, "pidNamespace": "pid:[test]", "incarnation": "inc", "role": "owner"},
    "unitName": "cohort-claim-" + "a" * 32 + ".scope", "spawnMarker": False, "invocationId": None,
    "engine": None, "cohort": None, "generation": 1, "stop": None, "proof": None, "reason": "reserve",
    "publishedAt": "2026-01-01T00:00:00.000Z",
}


def test_a_revision_written_before_the_eligibility_still_reads_and_is_written_the_same() -> None:
    """Format /2 is unchanged: a revision written before the eligibility existed reads back with
    eligibility None, and a revision without one is still written as exactly those bytes."""
    raw = canonical_json(_FORMAT_2_REVISION) + b"\n"
    rev = decode_revision(raw, key="seat", dirname=SEAT.dirname, number=1)
    assert rev.eligibility is None and rev == _revision()
    assert encode_revision(_revision()) == raw
    assert VALIDATOR.is_valid(_FORMAT_2_REVISION)


@pytest.mark.parametrize("taken", [False, True])
def test_an_eligibility_is_written_in_format_3_and_read_back(taken: bool) -> None:
    rev = _revision(eligibility=Eligibility("recover:7.a_b-c", taken))
    data = encode_revision(rev)
    obj = json.loads(data)
    assert obj["format"] == FORMAT_ELIGIBILITY == "mosaic-writer-claim/3"
    assert obj["eligibility"] == {"id": "recover:7.a_b-c", "taken": taken}
    assert {k: v for k, v in obj.items() if k != "eligibility"} == {**_FORMAT_2_REVISION, "format": FORMAT_ELIGIBILITY}
    assert decode_revision(data, key="seat", dirname=SEAT.dirname, number=1) == rev
    assert VALIDATOR.is_valid(obj)


def test_strict_reading_of_the_eligibility() -> None:
    """/3 needs the eligibility and /2 refuses it; the eligibility is exactly {id, taken} with an ID of 1 to
    128 characters of [A-Za-z0-9._:-] and a bool. Anything else is unreadable, and schema-invalid too."""
    obj = revision_to_json(_revision(eligibility=Eligibility("elig-1", False)))
    plain = revision_to_json(_revision())
    el = obj["eligibility"]
    assert isinstance(el, dict)
    cases = {
        "3-without": {k: v for k, v in obj.items() if k != "eligibility"},
        "2-with": {**plain, "eligibility": el},
        "3-null": {**obj, "eligibility": None},
        "extra-key": {**obj, "eligibility": {**el, "claimId": "claim-" + "a" * 32}},
        "missing-taken": {**obj, "eligibility": {"id": "elig-1"}},
        "taken-int": {**obj, "eligibility": {**el, "taken": 1}},
        "taken-text": {**obj, "eligibility": {**el, "taken": "false"}},
        "id-int": {**obj, "eligibility": {**el, "id": 7}},
        "id-empty": {**obj, "eligibility": {**el, "id": ""}},
        "id-long": {**obj, "eligibility": {**el, "id": "x" * 129}},
        "id-space": {**obj, "eligibility": {**el, "id": "a b"}},
        "id-newline": {**obj, "eligibility": {**el, "id": "ab\n"}},
        "format-4": {**obj, "format": "mosaic-writer-claim/4"},
    }
    for name, bad in cases.items():
        raw = json.dumps(bad, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        with pytest.raises(RecordError):
            decode_revision(raw, key="seat", dirname=SEAT.dirname, number=1)
        # The schema's pattern ends in `$`, which in ECMA-262 (the regex dialect JSON Schema specifies)
        # matches only at the end; Python's `re`, which jsonschema uses, also matches before a final newline.
        assert not VALIDATOR.is_valid(bad) or name == "id-newline", name
    with pytest.raises(ValueError):
        Eligibility("elig-1", 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("eligibility", [None, Eligibility("recover:7", True)])
def test_an_engine_uid_is_written_in_format_4_and_read_back(eligibility: Eligibility | None) -> None:
    """Issue 28 item 3: the uid allocated for the claim's engine is recorded with the spawn marker. A revision
    that carries one is /4: /3's fields (its eligibility null when the claim has none) plus `engineUid`; a
    revision without one is byte for byte what it was (/2 or /3). Read back equal, schema-valid."""
    rev = _revision(spawn_marker=True, reason="spawn-marker", engine_uid=61234, eligibility=eligibility)
    data = encode_revision(rev)
    obj = json.loads(data)
    assert obj["format"] == FORMAT_ENGINE_UID == "mosaic-writer-claim/4"
    assert obj["engineUid"] == 61234
    assert obj["eligibility"] == (None if eligibility is None else {"id": "recover:7", "taken": True})
    assert decode_revision(data, key="seat", dirname=SEAT.dirname, number=1) == rev
    assert VALIDATOR.is_valid(obj)
    assert json.loads(encode_revision(_revision()))["format"] == FORMAT  # without one: /2 as before


def test_strict_reading_of_the_engine_uid() -> None:
    """/4 needs `engineUid` (a uid from 1 to 2^32 - 2) and `eligibility` (null or the object); /2 and /3
    refuse `engineUid`. Anything else is unreadable, and schema-invalid too; the model refuses a bad uid."""
    obj = revision_to_json(_revision(spawn_marker=True, engine_uid=61234))
    plain = revision_to_json(_revision())
    cases = {
        "4-without-uid": {k: v for k, v in obj.items() if k != "engineUid"},
        "4-without-eligibility": {k: v for k, v in obj.items() if k != "eligibility"},
        "2-with-uid": {**plain, "engineUid": 61234},
        "3-with-uid": {**revision_to_json(_revision(eligibility=Eligibility("e", False))), "engineUid": 61234},
        "uid-zero": {**obj, "engineUid": 0},
        "uid-negative": {**obj, "engineUid": -1},
        "uid-text": {**obj, "engineUid": "61234"},
        "uid-bool": {**obj, "engineUid": True},
        "uid-null": {**obj, "engineUid": None},
        "uid-too-big": {**obj, "engineUid": 2**32 - 1},
    }
    for name, bad in cases.items():
        raw = json.dumps(bad, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        with pytest.raises(RecordError):
            decode_revision(raw, key="seat", dirname=SEAT.dirname, number=1)
        assert not VALIDATOR.is_valid(bad), name
    for bad_uid in (0, -5, True, "7", 2**32 - 1):
        with pytest.raises(ValueError):
            _revision(spawn_marker=True, engine_uid=bad_uid)


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                min_size=1, max_size=20)
_json_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | _json_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_json_text, inner, max_size=4),
    max_leaves=20,
)


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
    cohort=st.none() | st.dictionaries(_json_text, _json, max_size=5),
    eligibility=st.none() | st.builds(Eligibility, st.from_regex(r"[A-Za-z0-9._:-]{1,128}", fullmatch=True),
                                      st.booleans()),
)
def test_round_trip_and_schema(seat: SeatKey, session: SessionKey, state: State, marker: bool, number: int,
                               generation: int, leaf: str | None, detail: dict[str, object],
                               cohort: dict[str, Any] | None, eligibility: Eligibility | None) -> None:
    """Any revision the model accepts encodes canonically, reads back equal (the cohort reference as the
    same JSON), and is schema-valid: format /2 without an eligibility, /3 with one."""
    proof = ProofRef(ProofKind.COHORT, "sha256:" + "1" * 64, detail) if state is State.STOPPED else None  # type: ignore[arg-type]
    stop = StopInfo("s", None, "p") if state is State.STOPPING else None
    binding = Binding("b", "pi", "c", "main", leaf, Pins("v", "x", "y"))
    rev = _revision(key="session", seat=seat, session=session, state=state, spawn_marker=marker, number=number,
                    generation=generation, binding=binding, proof=proof, stop=stop,
                    engine=ProcessRef(1, 2) if marker else None, cohort=cohort, eligibility=eligibility)
    data = encode_revision(rev)
    back = decode_revision(data, key="session", dirname=session.dirname, number=number)
    assert back == rev
    assert json.loads(data)["cohort"] == cohort
    assert json.loads(data)["format"] == (FORMAT if eligibility is None else FORMAT_ELIGIBILITY)
    assert json.loads(data).get("eligibility") == (
        None if eligibility is None else {"id": eligibility.id, "taken": eligibility.taken})
    assert VALIDATOR.is_valid(json.loads(data))


# Any text a field may hold, escapes included: quotes, backslashes, control characters, U+2028, non-ASCII.
_any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1,
                    max_size=12) | st.sampled_from(['"', "\\", "\n\t\x01\x1f", "\u2028\u2029", "é☃𝄞", "</script>"])


@settings(max_examples=150, deadline=None, database=None)
@given(
    texts=st.lists(_any_text, min_size=24, max_size=24),
    state=st.sampled_from(list(State)),
    marker=st.booleans(),
    number=st.integers(1, 9_999_999_999),
    generation=st.integers(1, 2**62),
    pids=st.lists(st.integers(1, 2**31), min_size=4, max_size=4),
    leaf=st.booleans(),
    invocation=st.booleans(),
    confirmation=st.booleans(),
    detail=st.dictionaries(_any_text, st.none() | st.booleans() | st.integers(-(2**62), 2**62) | _any_text, max_size=4),
    cohort=st.none() | st.dictionaries(_json_text, _json, max_size=5),
    eligibility=st.none() | st.builds(Eligibility, st.from_regex(r"[A-Za-z0-9._:-]{1,128}", fullmatch=True),
                                      st.booleans()),
    engine_uid=st.none() | st.integers(1, 2**32 - 2),
)
def test_the_published_bytes_are_the_canonical_json_of_any_record(
        texts: list[str], state: State, marker: bool, number: int, generation: int, pids: list[int], leaf: bool,
        invocation: bool, confirmation: bool, detail: dict[str, object], cohort: dict[str, Any] | None,
        eligibility: Eligibility | None, engine_uid: int | None) -> None:
    """The bytes are written out field by field (`encode_revision`), not by the generic encoder: for any
    text in every string field, every optional field present and absent, and any integers, they are
    exactly the canonical JSON of the record (sorted keys, the `json` module's escapes, UTF-8) and a
    newline."""
    t = iter(texts)
    marker = marker or engine_uid is not None
    proof = ProofRef(ProofKind.COHORT, "sha256:" + "1" * 64, detail) if state is State.STOPPED else None  # type: ignore[arg-type]
    stop = StopInfo(next(t), next(t) if confirmation else None, next(t)) if state is State.STOPPING else None
    binding = Binding(next(t), next(t), next(t), next(t), next(t) if leaf else None, Pins(next(t), next(t), next(t)))
    owner = Owner(ProcessIdentity(pids[0], pids[1], next(t)), next(t))
    writer = Writer(ProcessIdentity(pids[2], pids[3], next(t)), next(t), "restart" if number % 2 else "owner")
    rev = _revision(seat=SeatKey(next(t), next(t), next(t)), session=SessionKey(next(t), next(t)), state=state,
                    spawn_marker=marker, number=number, generation=generation, binding=binding, owner=owner,
                    writer=writer, proof=proof, stop=stop, engine=ProcessRef(pids[0], pids[3]) if marker else None,
                    invocation_id=next(t) if invocation else None, cohort=cohort, eligibility=eligibility,
                    engine_uid=engine_uid, reason=next(t), published_at=next(t))
    assert encode_revision(rev) == canonical_json(revision_to_json(rev)) + b"\n"


def test_revisions_of_several_claims_in_turn_are_each_their_own_canonical_json() -> None:
    """What the revisions of a claim share is written once and kept for the next revision: a revision that
    differs from the last one written in any shared part (binding, either key, host, owner, writer process,
    incarnation or role, claim ID and unit name, generation), whatever else it shares with it, is written
    with its own, in any order."""
    base = _revision(spawn_marker=True, engine=ENGINE, invocation_id="inv")
    other_id = "claim-" + "b" * 32
    variants = [
        base,
        base.evolve(binding=Binding("b2", "pi", "c2", "br2", None, Pins("v2", "x2", "y2"))),
        base.evolve(seat=SeatKey("s2", "p2", "w2")),
        base.evolve(session=SessionKey("pi", "other-session")),
        base.evolve(host=HostIdentity("1" * 32, "2" * 32)),
        base.evolve(owner=Owner(ProcessIdentity(77, 78, "pid:[x]"), "inc-77")),
        base.evolve(writer=Writer(ProcessIdentity(88, 89, "pid:[y]"), base.writer.incarnation, "owner")),
        base.evolve(writer=Writer(base.writer.process, "another-incarnation", "owner")),
        base.evolve(writer=Writer(base.writer.process, base.writer.incarnation, "restart")),
        base.evolve(claim_id=other_id, unit_name=unit_name_for(other_id)),
        base.evolve(generation=7),
        base.evolve(number=2, reason="active", state=State.ACTIVE, key="session"),
    ]
    for rev in variants + variants[::-1] + [v for pair in zip(variants, variants[1:], strict=False) for v in pair]:
        assert encode_revision(rev) == canonical_json(revision_to_json(rev)) + b"\n"


def test_a_lone_surrogate_fails_the_encoding_as_canonical_json_does() -> None:
    """Text that is not valid Unicode cannot be UTF-8: the written-out encoding refuses it as
    `canonical_json` does (UnicodeEncodeError), in any field, before anything is published."""
    for changes in ({"reason": "bad \ud800"}, {"binding": Binding("b", "pi", "c", "main", "\udfff", BINDING.pins)}):
        rev = _revision(**changes)
        with pytest.raises(UnicodeEncodeError):
            canonical_json(revision_to_json(rev))
        with pytest.raises(UnicodeEncodeError):
            encode_revision(rev)


def test_model_refuses_incoherent_revisions() -> None:
    with pytest.raises(ValueError):
        _revision(state=State.STOPPING)  # stopping without its stop record
    with pytest.raises(ValueError):
        _revision(proof=cohort_proof())  # a proof on a reserved revision
    with pytest.raises(ValueError):
        _revision(unit_name="cohort-claim-" + "b" * 32 + ".scope")  # not derived from the claim ID
    with pytest.raises(ValueError):
        _revision(engine=(4242, 99))  # an engine is a ProcessRef
    with pytest.raises(ValueError):
        HostIdentity("", "boot")


_SIZE_PROBE = len(json.dumps({"pad": ""}, separators=(",", ":")))


@pytest.mark.parametrize(
    ("cohort", "why"),
    [
        ([1, 2], "not an object"),
        ("scope", "not an object"),
        ({1: "x"}, "a key that is not a string"),
        ({"x": math.nan}, "not JSON"),
        ({"x": math.inf}, "not JSON"),
        ({"x": {"y": -math.inf}}, "not JSON"),
        ({"x": b"bytes"}, "not JSON"),
        ({"x": {1, 2}}, "not JSON"),
        ({"x": object()}, "not JSON"),
        ({"x": "\ud800"}, "not UTF-8"),
        ({"pad": "x" * (MAX_COHORT_BYTES - _SIZE_PROBE + 1)}, "one byte over the cap"),
        ({"pad": "é" * ((MAX_COHORT_BYTES - _SIZE_PROBE) // 2 + 1)}, "over the cap counted in UTF-8 bytes"),
    ],
)
def test_a_cohort_reference_is_a_bounded_json_object(cohort: object, why: str) -> None:
    with pytest.raises(ValueError):
        _revision(spawn_marker=True, cohort=cohort)


def test_a_cohort_reference_at_the_cap_and_deeply_nested_to_the_bound() -> None:
    """Exactly MAX_COHORT_BYTES of canonical JSON is accepted; 32 levels of nesting are, 33 are not."""
    at_cap = {"pad": "x" * (MAX_COHORT_BYTES - _SIZE_PROBE)}
    assert len(json.dumps(at_cap, separators=(",", ":")).encode()) == MAX_COHORT_BYTES
    assert _revision(spawn_marker=True, cohort=at_cap).cohort == at_cap
    deep: dict[str, Any] = {}
    for _ in range(31):
        deep = {"d": deep}
    assert _revision(spawn_marker=True, cohort=deep).cohort == deep  # 32 objects deep
    with pytest.raises(ValueError):
        _revision(spawn_marker=True, cohort={"d": deep})


def test_a_cohort_reference_is_a_read_only_deep_copy() -> None:
    """The claim keeps its own copy: changing the caller's object later changes nothing, and the stored
    one cannot be changed (objects are read-only mappings, arrays tuples)."""
    original = cohort_ref("claim-" + "a" * 32, HOST, "inv-1")
    kept = copy.deepcopy(original)
    rev = _revision(spawn_marker=True, cohort=original)
    original["invocationId"] = "inv-other"
    original["containment"]["attempts"].append(["/elsewhere", "MOVED"])
    assert rev.cohort == kept and rev.cohort != original
    assert rev.cohort is not None
    with pytest.raises(TypeError):
        rev.cohort["invocationId"] = "x"  # type: ignore[index]
    attempts = rev.cohort["containment"]["attempts"]  # type: ignore[index,call-overload]
    assert attempts == (("/", "EACCES"),)
    assert hash(rev) == hash(_revision(spawn_marker=True, cohort=kept))
    assert revision_to_json(rev)["cohort"] == kept


def test_the_clock_is_seconds_and_publishedAt_is_utc_milliseconds(claim_root: Path) -> None:
    """One clock convention: a clock returns seconds since the epoch; `publishedAt` is formatted from it
    (UTC, milliseconds, `Z`) where a revision is built. acquire reads the clock once for both keys; an
    owner step once per key."""
    readings = iter([1767225600.123, 1767225601, 1767225602.5])
    c = make_store(claim_root, clock=lambda: next(readings)).acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    stamps = {key.kind: [r["publishedAt"] for r in raw_records(claim_root, key.dirname)]  # type: ignore[index]
              for key in (SEAT, SESSION)}
    assert stamps == {"seat": ["2026-01-01T00:00:00.123Z", "2026-01-01T00:00:01.000Z"],
                      "session": ["2026-01-01T00:00:00.123Z", "2026-01-01T00:00:02.500Z"]}


def test_publishedAt_within_a_second_and_across_its_edge_is_the_datetime_text(claim_root: Path) -> None:
    """The text of a second is kept for the next reading within the same second: readings in a burst, on
    both sides of a second's edge and at half a microsecond (rounded half to even, as datetime does,
    carried into the next second) give exactly `datetime.fromtimestamp(reading, UTC)`'s text."""
    from datetime import UTC, datetime  # noqa: PLC0415

    t0 = 1767225600.0
    readings = [t0 + 0.9994995, t0 + 0.9995, t0 + 0.9999994, t0 + 0.9999996, t0 + 1.0004, t0 + 1.0000005,
                t0 + 0.25, 1767225603, t0 + 86399.9999996]
    clock = iter(readings)
    run_lifecycle(make_store(claim_root, clock=lambda: next(clock)), lambda c, s: None)
    stamps = sorted(r["publishedAt"] for key in (SEAT, SESSION)  # type: ignore[index]
                    for r in raw_records(claim_root, key.dirname))
    expected = [datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
                for t in readings]
    assert stamps == sorted(expected + expected[:1])  # acquire's one reading is on both keys


@pytest.mark.parametrize("reading", [math.nan, math.inf, 1e20, "2026-01-01T00:00:00.000Z"])
def test_a_clock_reading_that_is_not_a_time_publishes_nothing(claim_root: Path, reading: object) -> None:
    with pytest.raises(ValueError):
        make_store(claim_root, clock=lambda: reading).acquire(SEAT, SESSION, BINDING)
    assert tree_bytes(claim_root) == {}


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
    c = make_store(claim_root).acquire(SEAT, SESSION, BINDING, eligibility="elig-1")
    documented = set(_readme_table("Record format"))
    # The widest form, /4: an eligibility and an engine uid (the uid comes with the spawn marker).
    assert documented == set(revision_to_json(c.head("seat").evolve(spawn_marker=True, engine_uid=61234)))


class _OddMapping(dict):  # type: ignore[type-arg]
    """A mapping that is not exactly a dict (the cohort's canonical bytes come from its frozen copy)."""


class _OddText(str):
    pass


@pytest.mark.parametrize("cohort", [
    None,
    {"kind": "scope", "n": 1, "x": 1.5, "ok": True, "none": None, "list": [1, [2, {"b": 1, "a": 2}]], "é": "ü"},
    _OddMapping(kind="scope", nested=(1, 2, _OddMapping(z=_OddText("t")))),
    {"cohort": None, "text": '"cohort":null', "quote": '"', "back": "\\"},
])
def test_the_published_bytes_are_the_canonical_json_of_the_record(cohort: object) -> None:
    """A revision's bytes are spliced from the cohort reference's own canonical bytes (kept once
    per claim) instead of copying and encoding it again; they must be exactly the canonical JSON of the
    whole record, whatever the cohort, the proof's detail or the other fields hold."""
    rev = _revision(spawn_marker=True, cohort=cohort)
    assert encode_revision(rev) == canonical_json(revision_to_json(rev)) + b"\n"
    detail = {"cohort": None, "why": '"cohort":null'}
    stopped = rev.evolve(state=State.STOPPED, proof=ProofRef(ProofKind.COHORT, "sha256:" + "ab" * 32, detail))
    assert encode_revision(stopped) == canonical_json(revision_to_json(stopped)) + b"\n"
    again = decode_revision(encode_revision(stopped), key=stopped.key, dirname=stopped.dirname,
                            number=stopped.number)
    assert again == stopped and encode_revision(again) == encode_revision(stopped)
