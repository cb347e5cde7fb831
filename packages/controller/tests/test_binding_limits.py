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
    "data": LimitHeld("rlimit", EngineLimits().data or 0, "RLIMIT_DATA", False, "no cgroup controller limits one "
                                                                            "process's memory"),
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


def test_the_binding_record_names_the_engine_uid_of_this_execution_or_null():
    """Issue 28 item 3: the uid allocated for this execution's engine is on the binding record (the claim
    records it too); null when the engine runs as the launcher's one account."""
    record = Harness(engine_uid=61234).core.binding_record()
    validate(record)
    assert record["engineUid"] == 61234
    record = Harness().core.binding_record()
    validate(record)
    assert record["engineUid"] is None
