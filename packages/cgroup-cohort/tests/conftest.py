"""Shared builders for the unit tests (no cgroup, no systemd, no root needed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from mosaic.cgroup_cohort import CohortClaim, Containment, MemberRef, ObservedIdentity, StopRequest

MACHINE = "0123456789abcdef0123456789abcdef"
BOOT = "fedcba9876543210fedcba9876543210"
INVOCATION = "11111111111111111111111111111111"
HELD = Containment(True, "engine-uid", (("supervisor/cgroup.procs", "EACCES"), ("cgroup.procs", "EACCES")))


def make_claim(kind: str = "scope", **over: Any) -> CohortClaim:
    base = CohortClaim(
        kind=kind,  # type: ignore[arg-type]
        claim_id="c0ffee",
        unit="mosaic-c0ffee.scope" if kind == "scope" else ("mosaic-c0ffee" if kind == "direct" else ""),
        machine_id=MACHINE,
        boot_id=BOOT,
        engine=MemberRef(4242, 1000),
        socket_path=None if kind == "pgroup" else "/run/x/mosaic-c0ffee.sock",
        invocation_id=INVOCATION if kind == "scope" else None,
        cgroup_path=None if kind == "pgroup" else "/app.slice/mosaic-c0ffee.scope",
        unit_cgroup_id=None if kind == "pgroup" else 100,
        engine_cgroup_id=None if kind == "pgroup" else 102,
        shim=None if kind == "pgroup" else MemberRef(4240, 990),
        pgid=4242 if kind == "pgroup" else None,
        containment=HELD if kind != "pgroup" else Containment(False, "none"),
        features=() if kind == "pgroup" else ("cgroup.freeze", "cgroup.kill"),
    )
    return replace(base, **over)


def make_identity(claim: CohortClaim, **over: Any) -> ObservedIdentity:
    base = ObservedIdentity(
        machine_id=claim.machine_id,
        boot_id=claim.boot_id,
        invocation_id=claim.invocation_id,
        shim_invocation_id=claim.invocation_id,
        unit_cgroup_id=claim.unit_cgroup_id if claim.kind == "direct" else None,
        shim_unit_cgroup_id=claim.unit_cgroup_id,
        engine_cgroup_id=claim.engine_cgroup_id,
        containment=claim.containment,
        features=("cgroup.freeze", "cgroup.kill"),
    )
    return replace(base, **over)


REQUEST = StopRequest("stop-1", "pi-conv-1", "exec-1", {"confirmation": "conf-1", "actor": "local-operator"})


@pytest.fixture
def claim_factory() -> Callable[..., CohortClaim]:
    return make_claim


@pytest.fixture
def identity_factory() -> Callable[..., ObservedIdentity]:
    return make_identity


@pytest.fixture
def request_() -> StopRequest:
    return REQUEST
