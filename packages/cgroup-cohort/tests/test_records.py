"""The cohort reference as the writer claim stores it (to_dict, then from_dict in a fresh process, K10/K11),
the unit-name rule every launcher applies, the refusal family, and the package README's two tables."""

from __future__ import annotations

import copy
import json
import os
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mosaic.cgroup_cohort import CODES, CohortRef, CohortRefusal, PgroupLauncher, ScopeLauncher, UserManager
from mosaic.cgroup_cohort.reference import MAX_REF_BYTES, Containment
from mosaic.cgroup_cohort.stop import UNCERTAIN_REASONS, Death
from mosaic.safe_open import HostIdentity, ProcessRef, Refusal, canonical_json

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
README = REPO / "packages" / "cgroup-cohort" / "README.md"

hexid = st.text("0123456789abcdef", min_size=32, max_size=32)
process = st.builds(ProcessRef, st.integers(1, 2**22), st.integers(0, 2**40))
ident = st.integers(1, 2**63)
unit = st.from_regex(r"[A-Za-z0-9:_.\-]{1,60}\.scope", fullmatch=True)
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=40)
containment = st.builds(Containment, st.booleans(), text,
                        st.lists(st.tuples(text, text), max_size=5).map(tuple))
features = st.lists(st.sampled_from(["cgroup.freeze", "cgroup.kill"]), unique=True).map(tuple)


@st.composite
def refs(draw: st.DrawFn) -> CohortRef:
    kind = draw(st.sampled_from(["scope", "direct", "pgroup"]))
    common: dict[str, Any] = {"kind": kind, "unit": draw(unit), "host": HostIdentity(draw(hexid), draw(hexid)),
                              "engine": draw(process), "containment": draw(containment), "features": draw(features)}
    if kind == "pgroup":
        return CohortRef(**common, pgid=draw(st.integers(1, 2**22)))
    return CohortRef(**common, socket_path="/run/m/" + draw(unit) + ".sock",
                     invocation_id=draw(hexid) if kind == "scope" else None,
                     cgroup_path="/app.slice/" + draw(unit), unit_cgroup_id=draw(ident),
                     engine_cgroup_id=draw(ident), shim=draw(process))


@given(refs())
def test_reference_round_trips_through_json_unchanged(ref):
    """What the claim stores (canonical JSON of to_dict) rebuilds the same reference, and to_dict holds
    JSON types only (a JSON round trip changes nothing)."""
    stored = json.loads(canonical_json(ref.to_dict()))
    assert stored == ref.to_dict()
    assert CohortRef.from_dict(stored) == ref
    assert len(canonical_json(stored)) <= MAX_REF_BYTES


def _stored(ref_factory, kind: str = "scope") -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return json.loads(json.dumps(ref_factory(kind).to_dict()))


def test_reference_dict_keys_are_the_documented_ones(ref_factory):
    assert set(_stored(ref_factory)) == {"kind", "unit", "host", "engine", "socketPath", "invocationId",
                                         "cgroupPath", "unitCgroupId", "engineCgroupId", "shim", "pgid",
                                         "containment", "features"}
    assert _stored(ref_factory)["host"] == {"machineId": "0123456789abcdef0123456789abcdef",
                                            "bootId": "fedcba9876543210fedcba9876543210"}


# (what to change in the stored scope reference, why it is malformed)
MALFORMED: list[tuple[str, Any]] = [
    ("kind", "nspawn"),
    ("kind", None),
    ("unit", "mosaic/x.scope"),
    ("unit", "x.service"),
    ("unit", "a" * 250 + ".scope"),
    ("unit", 7),
    ("host", {"machineId": "0" * 32}),
    ("host", {"machineId": "0" * 32, "bootId": "0" * 32, "extra": 1}),
    ("host", {"machineId": "ABC", "bootId": "0" * 32}),
    ("host", "0" * 32),
    ("engine", {"pid": "1", "startTime": 2}),
    ("engine", {"pid": True, "startTime": 2}),
    ("engine", {"pid": 0, "startTime": 2}),
    ("engine", [1, 2]),
    ("socketPath", None),
    ("socketPath", "relative.sock"),
    ("socketPath", "/" + "s" * 200),
    ("invocationId", None),
    ("invocationId", "not-an-id"),
    ("cgroupPath", None),
    ("cgroupPath", "app.slice/x"),
    ("unitCgroupId", None),
    ("unitCgroupId", 1.5),
    ("engineCgroupId", "102"),
    ("shim", None),
    ("shim", {"pid": 1}),
    ("pgid", 4242),
    ("containment", {"held": "yes", "method": "engine-uid", "attempts": []}),
    ("containment", {"held": True, "method": "engine-uid"}),
    ("containment", {"held": True, "method": "engine-uid", "attempts": [["a"]]}),
    ("features", "cgroup.kill"),
    ("features", [1]),
    ("features", ["x" * 100]),
]


@pytest.mark.parametrize(("key", "value"), MALFORMED, ids=[f"{k}={v!r}"[:40] for k, v in MALFORMED])
def test_malformed_stored_reference_is_refused_with_value_error(key, value, ref_factory):
    stored = _stored(ref_factory)
    stored[key] = value
    with pytest.raises(ValueError):
        CohortRef.from_dict(stored)


@pytest.mark.parametrize("change", ["missing", "unknown", "not-an-object", "deep-type"])
def test_stored_reference_with_wrong_keys_is_refused(change, ref_factory):
    stored: Any = _stored(ref_factory)
    if change == "missing":
        del stored["features"]
    elif change == "unknown":
        stored["claimId"] = "c0ffee"  # the reference carries no claim ID: the unit name ties it to the claim
    elif change == "not-an-object":
        stored = list(stored.items())
    else:
        stored["containment"]["attempts"] = [None]
    with pytest.raises(ValueError):
        CohortRef.from_dict(stored)


@pytest.mark.parametrize(("kind", "key", "value"), [
    ("direct", "invocationId", "1" * 32),  # a direct cgroup has no InvocationID
    ("pgroup", "pgid", None),
    ("pgroup", "socketPath", "/run/x.sock"),
    ("pgroup", "shim", {"pid": 1, "startTime": 2}),
    ("pgroup", "unitCgroupId", 5),
])
def test_reference_must_be_well_formed_for_its_kind(kind, key, value, ref_factory):
    stored = _stored(ref_factory, kind)
    assert CohortRef.from_dict(stored) == ref_factory(kind)
    stored[key] = value
    with pytest.raises(ValueError):
        CohortRef.from_dict(stored)


def test_reference_is_bounded(ref_factory):
    big = Containment(False, "none", tuple((f"/{'x' * 1000}/{i}", "MOVED") for i in range(16)))
    with pytest.raises(ValueError, match="bytes of JSON"):
        ref_factory("direct", containment=big)


def test_death_round_trip():
    d = Death(ProcessRef(5, 6), 12.5, "reaped", signal=9)
    assert Death.from_dict(d.to_dict()) == d


BAD_UNITS = ["", ".", "..", ".scope" + "/x", "a/b.scope", "x.service", "x y.scope", "x@y.scope", "x\\y.scope",
             "a" * 250 + ".scope", "cohort-claim-1"]


@pytest.mark.parametrize("bad", BAD_UNITS)
def test_every_launcher_refuses_what_cannot_name_a_scope_unit(bad, tmp_path):
    """The unit name comes from the claim; a launcher validates it (and never derives one) before it
    starts anything: ``configuration``, for launch and presence alike."""
    sockets = tmp_path / "s"
    sockets.mkdir(mode=0o700)
    launchers = [PgroupLauncher(), ScopeLauncher(UserManager(systemd_run="/nonexistent/systemd-run"), str(sockets))]
    for launcher in launchers:
        with pytest.raises(CohortRefusal) as e:
            launcher.launch(bad, ["/bin/true"])
        assert e.value.code == "configuration", (launcher.kind, bad)
        with pytest.raises(CohortRefusal) as e:
            launcher.presence(bad)
        assert e.value.code == "configuration", (launcher.kind, bad)
    assert list(sockets.iterdir()) == []


def test_socket_path_that_does_not_fit_sun_path_is_configuration(tmp_path):
    deep = tmp_path / ("d" * 60)
    deep.mkdir(mode=0o700)
    launcher = ScopeLauncher(UserManager(systemd_run="/nonexistent/systemd-run"), str(deep))
    with pytest.raises(CohortRefusal) as e:
        launcher.launch("cohort-claim-" + "0" * 32 + ".scope", ["/bin/true"])
    assert e.value.code == "configuration" and "socket path" in e.value.message


def test_refusals_are_values_of_the_shared_family():
    r = CohortRefusal("foreign-host", "elsewhere")
    assert isinstance(r, Refusal)
    assert r.to_dict() == {"code": "foreign-host", "reconcile": False, "message": "elsewhere"}
    assert r == CohortRefusal("foreign-host", "elsewhere") and r != CohortRefusal("foreign-host", "other")
    assert pickle.loads(pickle.dumps(r)) == r
    assert CohortRefusal("unit-busy", "x").reconcile is True
    assert CohortRefusal("unit-busy", "x", reconcile=False).reconcile is False
    assert dict(CohortRefusal.CODES) == dict(CODES)
    with pytest.raises(ValueError):
        CohortRefusal("nope", "x")


def test_copy_of_a_reference_is_equal_and_immutable(ref_factory):
    ref = ref_factory("scope")
    assert copy.deepcopy(ref) == ref
    with pytest.raises(AttributeError):
        ref.unit = "x.scope"  # type: ignore[misc]


def _table(section: str) -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(section)
    rows: dict[str, str] = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        m = re.fullmatch(r"`([a-z0-9-]+)`", cells[0])
        if m:
            rows[m.group(1)] = cells[1]
    return rows


def test_readme_refusal_table_is_the_code_table():
    rows = _table("## Refusal codes")
    assert set(rows) == set(CODES)
    for code, reconcile in rows.items():
        assert reconcile == ("yes" if CODES[code] else "no"), code


def test_readme_uncertain_reasons_table_is_complete():
    assert set(_table("## Why a stop ends uncertain")) == set(UNCERTAIN_REASONS)


def _frozen(value: Any) -> Any:
    """A JSON value deep-frozen the way the writer claim stores a cohort (read-only mappings, tuples)."""
    from types import MappingProxyType

    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def test_reference_read_back_from_a_frozen_claim_copy_is_the_same(ref_factory):
    # Found by the controller's claim <-> cohort contract test: writer-claim hands the stored reference
    # back deep-frozen; a JSON array is then a tuple, and it must still read back.
    for kind in ("scope", "direct"):
        ref = ref_factory(kind)
        assert CohortRef.from_dict(_frozen(ref.to_dict())) == ref
