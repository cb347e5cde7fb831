"""Shared builders for the unit tests (no cgroup, no systemd, no root needed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from mosaic.cgroup_cohort import CohortRef, StopRequest
from mosaic.cgroup_cohort.reference import Containment
from mosaic.cgroup_cohort.stop import ObservedIdentity
from mosaic.safe_open import HostIdentity, ProcessRef

MACHINE = "0123456789abcdef0123456789abcdef"
BOOT = "fedcba9876543210fedcba9876543210"
HOST = HostIdentity(MACHINE, BOOT)
INVOCATION = "11111111111111111111111111111111"
# The shape mosaic.writer_claim.unit_name_for gives: cohort-<claim ID>.scope.
UNIT = "cohort-claim-c0ffee00c0ffee00c0ffee00c0ffee00.scope"
HELD = Containment(True, "engine-uid", (("supervisor/cgroup.procs", "EACCES"), ("cgroup.procs", "EACCES")))


def make_ref(kind: str = "scope", **over: Any) -> CohortRef:
    """A well-formed reference of ``kind`` on the fake host, with ``over`` replacing fields."""
    cgroup = kind != "pgroup"
    base = CohortRef(
        kind=kind,  # type: ignore[arg-type]
        unit=UNIT,
        host=HOST,
        engine=ProcessRef(4242, 1000),
        socket_path=f"/run/x/{UNIT}.sock" if cgroup else None,
        invocation_id=INVOCATION if kind == "scope" else None,
        cgroup_path=f"/app.slice/{UNIT}" if cgroup else None,
        unit_cgroup_id=100 if cgroup else None,
        engine_cgroup_id=102 if cgroup else None,
        shim=ProcessRef(4240, 990) if cgroup else None,
        pgid=None if cgroup else 4242,
        containment=HELD if cgroup else Containment(False, "none"),
        features=("cgroup.freeze", "cgroup.kill") if cgroup else (),
    )
    return replace(base, **over)


def make_identity(ref: CohortRef, **over: Any) -> ObservedIdentity:
    """What the live system would say about ``ref``'s own cohort, with ``over`` replacing fields."""
    base = ObservedIdentity(
        host=ref.host,
        invocation_id=ref.invocation_id,
        shim_invocation_id=ref.invocation_id,
        unit_cgroup_id=ref.unit_cgroup_id if ref.kind == "direct" else None,
        shim_unit_cgroup_id=ref.unit_cgroup_id,
        engine_cgroup_id=ref.engine_cgroup_id,
        containment=ref.containment,
        features=("cgroup.freeze", "cgroup.kill"),
    )
    return replace(base, **over)


REQUEST = StopRequest("stop-1", "pi-conv-1", "exec-1", {"confirmation": "conf-1", "actor": "local-operator"})


@pytest.fixture
def ref_factory() -> Callable[..., CohortRef]:
    return make_ref


@pytest.fixture
def identity_factory() -> Callable[..., ObservedIdentity]:
    return make_identity


@pytest.fixture
def request_() -> StopRequest:
    return REQUEST
