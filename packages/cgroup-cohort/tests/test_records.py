"""Records round-trip through JSON (a controller stores the claim in its writer claim, K10), and the
package README's refusal table is the code table."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mosaic.cgroup_cohort import (
    CODES,
    UNCERTAIN_REASONS,
    CohortClaim,
    CohortRefusal,
    Containment,
    Death,
    EvidenceUnavailable,
    MemberRef,
    unit_name_for,
)

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
README = REPO / "packages" / "cgroup-cohort" / "README.md"

hexid = st.text("0123456789abcdef", min_size=32, max_size=32)
member = st.builds(MemberRef, st.integers(1, 2**22), st.integers(0, 2**40))


@given(
    kind=st.sampled_from(["scope", "direct", "pgroup"]),
    mid=hexid, bid=hexid, inv=st.none() | hexid, engine=member, shim=st.none() | member,
    ids=st.tuples(st.none() | st.integers(1, 2**63), st.none() | st.integers(1, 2**63)),
    held=st.booleans(),
)
def test_claim_round_trips_through_json(kind, mid, bid, inv, engine, shim, ids, held):
    claim = CohortClaim(kind=kind, claim_id="abc", unit="mosaic-abc.scope", machine_id=mid, boot_id=bid,
                        engine=engine, socket_path="/s", invocation_id=inv, cgroup_path="/x",
                        unit_cgroup_id=ids[0], engine_cgroup_id=ids[1], shim=shim, pgid=None,
                        containment=Containment(held, "engine-uid", (("a", "EACCES"),)),
                        features=("cgroup.kill",))
    assert CohortClaim.from_dict(json.loads(json.dumps(claim.to_dict()))) == claim


def test_claim_with_unknown_kind_is_refused():
    d = {"kind": "nspawn", "claimId": "x", "unit": "u", "machineId": "m", "bootId": "b",
         "engine": {"pid": 1, "startTime": 2}}
    with pytest.raises(ValueError):
        CohortClaim.from_dict(d)


def test_death_round_trip():
    d = Death(MemberRef(5, 6), 12.5, "reaped", signal=9)
    assert Death.from_dict(d.to_dict()) == d


@pytest.mark.parametrize("claim_id", ["a/b", "", "x" * 65, "a b", "../x"])
def test_unit_name_refuses_what_cannot_name_a_unit(claim_id):
    with pytest.raises(CohortRefusal) as e:
        unit_name_for(claim_id)
    assert e.value.code == "configuration"


def test_unit_name_from_claim_id():
    assert unit_name_for("7f3a-01_b") == "mosaic-7f3a-01_b.scope"


def test_refusal_value_shape():
    r = CohortRefusal("foreign-host", "elsewhere")
    assert r.to_dict() == {"code": "foreign-host", "reconcile": False, "message": "elsewhere"}
    assert CohortRefusal("unit-busy", "x").reconcile is True
    assert CohortRefusal("unit-busy", "x", reconcile=False).reconcile is False
    with pytest.raises(ValueError):
        CohortRefusal("nope", "x")
    with pytest.raises(ValueError):
        EvidenceUnavailable("empty", "x")


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
