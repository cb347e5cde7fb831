"""The binding record says where the engine's limits hold, as the launch reported them
(cgroup-cohort's held limits), and null when this incarnation did not launch the engine: unknown is never
"no limits". Schema-checked."""

from __future__ import annotations

from core_harness import Harness, validate

from mosaic.cgroup_cohort import EngineLimits
from mosaic.cgroup_cohort.limits import LimitHeld, held_to_dict

HELD = held_to_dict({
    "pids": LimitHeld("rlimit", 4096, "RLIMIT_NPROC", False, "pids.max: the parent does not enable the pids "
                                                              "controller for the unit"),
    "memory": LimitHeld("cgroup", 4 << 30, "engine/memory.max"),
    "cpu": LimitHeld("none", None, None, False, "no rlimit bounds a rate"),
    "core": LimitHeld("rlimit", EngineLimits().core or 0, "RLIMIT_CORE", False, "no cgroup controller"),
})


def test_the_binding_record_carries_where_each_limit_holds():
    record = Harness(limits=HELD).core.binding_record()
    validate(record)
    assert record["limits"] == HELD


def test_an_engine_this_incarnation_did_not_launch_has_limits_null_not_empty():
    record = Harness().core.binding_record()
    validate(record)
    assert record["limits"] is None
