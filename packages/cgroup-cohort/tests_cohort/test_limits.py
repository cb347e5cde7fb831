"""The engine's limits on the real kernel (README "Limits"), on both routes.

Where the unit's parent enables a controller, its limit is in engine/'s file; where not, the rlimit stands
in on the engine and everything it starts. Each test reads what the unit is offered itself (its
``cgroup.controllers``, as the test sees it) and expects the route from that, so the same test checks the
cgroup route on a host that has the controllers and the fallback on one that has not (this one: pids,
memory and cpu are bound to cgroup v1, facts §1). One test makes a parent that enables nothing (the
fallback everywhere), and one makes a parent that enables all three (skipped, loudly, where the cgroup2
tree has none to give).
"""

from __future__ import annotations

import os
import secrets
import subprocess

import pytest

from mosaic.cgroup_cohort import DirectCgroupLauncher, EngineLimits
from mosaic.cgroup_cohort.cgroupfs import find_cgroup2
from mosaic.cgroup_cohort.testing import alive, populated, remove_cgroup
from mosaic.cgroup_cohort.testing.lab import Lab, Launched
from mosaic.safe_open import ProcessRef

MiB, GiB = 1 << 20, 1 << 30
# Small and unlike every default, so a default written instead of them shows.
ASKED = EngineLimits(pids=300, memory=256 * MiB, address_space=8 * GiB, cpu=0.5, core=0, data=3 * GiB)
FILES = {"pids": ("pids", "pids.max", "300"), "memory": ("memory", "memory.max", str(256 * MiB)),
         "cpu": ("cpu", "cpu.max", "50000 100000")}
STORM = 64  # the cohort's task budget in the storm tests: small, so the storm is short on 2 cores


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _offered(cgroup: str) -> set[str]:
    """The controllers the cgroup's parent enables for it (its cgroup.controllers)."""
    return set(_read(os.path.join(cgroup, "cgroup.controllers")).split())


def _expected_via(offered: set[str]) -> dict[str, str]:
    return {"pids": "cgroup" if "pids" in offered else "rlimit",
            "memory": "cgroup" if "memory" in offered else "rlimit",
            "data": "rlimit",
            "cpu": "cgroup" if "cpu" in offered else "none",
            "core": "rlimit"}


def _proc_limits(pid: int) -> dict[str, tuple[int, int]]:
    """/proc/<pid>/limits as {name: (soft, hard)} (-1: unlimited)."""
    out: dict[str, tuple[int, int]] = {}
    for line in _read(f"/proc/{pid}/limits").splitlines()[1:]:
        name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
        out[name] = tuple(-1 if v == "unlimited" else int(v) for v in (soft, hard))  # type: ignore[assignment]
    return out


def _tasks_below(cgroup: str) -> int:
    """Every task (thread) in the cgroup and its descendants."""
    n = 0
    for dirpath, _dirs, _files in os.walk(cgroup):
        n += len(_read(os.path.join(dirpath, "cgroup.threads")).split())
    return n


def _account_tasks(uid: int) -> int:
    """Every task whose real uid is ``uid``: what RLIMIT_NPROC counts (the cohort's and any other's)."""
    n = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = _read(f"/proc/{name}/status")
            tasks = len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
        real = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
        n += tasks if int(real) == uid else 0
    return n


def _proof_members(proof: dict) -> dict[ProcessRef, dict]:
    return {ProcessRef(m["pid"], m["startTime"]): m for m in proof["members"]}


def _check_rlimits(pid: int, via: dict[str, str], asked: EngineLimits) -> None:
    """The rlimits the launch recorded are on ``pid``, soft and hard, exactly."""
    limits = _proc_limits(pid)
    assert limits["Max core file size"] == (asked.core, asked.core)
    assert limits["Max data size"] == (asked.data, asked.data)  # per process, wherever memory.max holds
    if via["pids"] == "rlimit":
        assert limits["Max processes"] == (asked.pids, asked.pids)
    if via["memory"] == "rlimit":
        assert limits["Max address space"] == (asked.address_space, asked.address_space)
    else:
        assert limits["Max address space"] == (-1, -1)  # memory.max holds it: no RLIMIT_AS besides


def _storm_is_capped_and_the_stop_proves(lab: Lab, launched: Launched, cap: int) -> None:
    """K12's shape with the limit on: the storm met EAGAIN inside the cohort, the cohort never held more than
    ``cap`` tasks, the host still forks, and the force stop's proof holds with every storm child listed."""
    storm = launched.member("fork-storm")
    children = [ProcessRef(pid, start) for pid, start in storm["children"]]
    lab.tracked.extend(children)
    assert storm["errno"] == "EAGAIN", storm
    assert 0 < storm["forked"] < cap
    assert _tasks_below(launched.engine_path_host) <= cap
    # The host is not the cohort: this process (another uid, outside engine/) still starts processes.
    assert subprocess.run(["/bin/true"], timeout=30).returncode == 0
    result = lab.stop(launched)
    ev = result.outcome.evidence
    assert result.outcome.state == "stopped", result.outcome
    assert result.outcome.membership_complete and result.proof is not None
    assert result.proof["membershipComplete"] is True
    assert ev.frozen and ev.enumeration_stable and ev.frozen_rechecked and ev.populated0
    members = _proof_members(result.proof)
    forker = launched.member("fork-loop")
    for m in [*children, ProcessRef(storm["pid"], storm["startTime"]), ProcessRef(forker["pid"], forker["startTime"])]:
        assert m in members and members[m]["death"] == "reaped:signal 9", m
        assert not alive(m)
    assert populated(launched.engine_path_host) is False


def _storm_spec(unit: str) -> dict:
    # The ceiling: a limit that does not hold ends the storm there (errno null), not at the host's pid_max.
    return {"fork_storm": True, "storm_ceiling": 4 * STORM, "fork_loop": True, "fork_cap": 4, "term_ignorers": 1, "setsid_daemon": True,
            "subcgroup": os.path.join(unit, "engine", "sub")}


def test_limits_fork_storm_in_a_tool_call_is_capped_and_the_stop_proof_holds(lab):
    """A member forking children that live on, as fast as it can, is stopped by the pids limit with EAGAIN
    (pids.max where the unit gets the controller; else RLIMIT_NPROC, which counts every task of the engine's
    uid, so its budget is STORM more than the account holds now: other suites' engines count too), and the
    force stop still proves (membershipComplete, populated 0, every member listed and reaped)."""
    cap = STORM + _account_tasks(lab.engine.uid)
    launched = lab.launch(_storm_spec, limits=EngineLimits(pids=cap))
    offered = _offered(launched.unit_path_host)
    held = launched.handle.limits["pids"]
    assert (held.via, held.value, held.liftable) == (_expected_via(offered)["pids"], cap, False)
    if held.via == "cgroup":
        assert _read(os.path.join(launched.engine_path_host, "pids.max")) == str(cap)
    else:
        storm = launched.member("fork-storm")
        for pid in (launched.ref.engine.pid, storm["pid"], storm["children"][0][0]):
            assert _proc_limits(pid)["Max processes"] == (cap, cap)
    _storm_is_capped_and_the_stop_proves(lab, launched, cap)


def test_limits_appear_exactly_where_they_hold(lab):
    """Every limit asked is where the launch says it holds, with its value: in engine/'s file (and its
    controller enabled in the unit's cgroup.subtree_control, nothing else) or as the engine's rlimit, soft
    and hard, inherited by what it starts; cpu, which no rlimit can hold, nowhere. The unit's parent,
    which this launch did not create, is not written."""
    parent = os.path.dirname(lab.paths("x.scope")[1])
    before = _read(os.path.join(parent, "cgroup.subtree_control"))
    launched = lab.launch({"sleepers": 1}, limits=ASKED)
    offered = _offered(launched.unit_path_host)
    via = _expected_via(offered)
    held = launched.handle.limits
    assert {name: h.via for name, h in held.items()} == via
    assert not any(h.liftable for h in held.values())  # the engine's uid owns no limit file, is not root
    for name, (controller, file, value) in FILES.items():
        if controller in offered:
            assert _read(os.path.join(launched.engine_path_host, file)) == value
            assert str(held[name].value) == value and held[name].where == f"engine/{file}"
    assert set(_read(os.path.join(launched.unit_path_host, "cgroup.subtree_control")).split()) == {
        controller for controller, _, _ in FILES.values() if controller in offered}
    for h, rlimit, value in ((held["pids"], "RLIMIT_NPROC", ASKED.pids),
                             (held["memory"], "RLIMIT_AS", ASKED.address_space), (held["core"], "RLIMIT_CORE", 0),
                             (held["data"], "RLIMIT_DATA", ASKED.data)):
        if h.via == "rlimit":
            assert (h.where, h.value) == (rlimit, value)
    if held["cpu"].via == "none":
        assert held["cpu"].value is None and "no rlimit bounds a rate" in str(held["cpu"].why)
    for pid in (launched.ref.engine.pid, launched.members("sleeper")[0].pid):
        _check_rlimits(pid, via, ASKED)
    assert _read(os.path.join(parent, "cgroup.subtree_control")) == before
    assert (r := lab.stop(launched)).outcome.state == "stopped", r.outcome


def test_limits_fall_back_to_rlimits_under_a_parent_that_enables_no_controller(
        direct_parent, socket_dir, stage, engine_credentials):
    """A parent whose cgroup.subtree_control enables nothing (made here, so on any host): the unit is offered
    no controller, the shim writes no cgroup but its own, and RLIMIT_NPROC, RLIMIT_AS and RLIMIT_CORE hold
    on the engine, recorded "rlimit" with their values; cpu is recorded "none"."""
    bare = os.path.join(direct_parent, f"bare-{secrets.token_hex(3)}")
    os.mkdir(bare, 0o755)
    lab = Lab("direct", socket_dir, stage, engine_credentials, direct_parent=bare)
    try:
        launched = lab.launch({"sleepers": 1}, limits=ASKED)
        held = launched.handle.limits
        assert {name: h.via for name, h in held.items()} == {
            "pids": "rlimit", "memory": "rlimit", "data": "rlimit", "cpu": "none", "core": "rlimit"}
        assert [(held[n].where, held[n].value) for n in ("pids", "memory", "data", "core")] == [
            ("RLIMIT_NPROC", 300), ("RLIMIT_AS", 8 * GiB), ("RLIMIT_DATA", 3 * GiB), ("RLIMIT_CORE", 0)]
        for name in ("pids", "memory", "cpu"):
            assert f"the parent does not enable the {name} controller for the unit" in str(held[name].why)
        assert _read(os.path.join(bare, "cgroup.subtree_control")) == ""
        assert _read(os.path.join(launched.unit_path_host, "cgroup.subtree_control")) == ""
        for pid in (launched.ref.engine.pid, launched.members("sleeper")[0].pid):
            _check_rlimits(pid, _expected_via(set()), ASKED)
        assert (r := lab.stop(launched)).outcome.state == "stopped", r.outcome
    finally:
        problems = lab.cleanup()
        remove_cgroup(bare)
    assert not problems, problems


def test_limits_held_by_the_cgroup_where_the_parent_enables_the_controllers(
        direct_parent, socket_dir, stage, engine_credentials):
    """Where the cgroup2 tree has pids, memory and cpu to give, a parent made here enables them: every limit
    is then in engine/'s file, and the fork storm is capped at exactly pids.max (which counts the cohort
    alone), with the force stop's proof intact."""
    wanted = {"pids", "memory", "cpu"}
    have = _offered(direct_parent)
    if not wanted <= have:
        root = find_cgroup2().mount_point
        pytest.skip(f"SKIPPED LOUDLY: the cgroup route cannot run here: {direct_parent} is offered "
                    f"{' '.join(sorted(have)) or 'no controller'} by the cgroup2 root, which has "
                    f"{_read(os.path.join(root, 'cgroup.controllers')) or 'none'} (pids, memory and cpu are bound "
                    "to cgroup v1 on this host, facts §1: moving them is a host change no test makes)")
    ours = os.path.join(direct_parent, f"ctl-{secrets.token_hex(3)}")
    enable = " ".join(f"+{c}" for c in sorted(wanted))
    with open(os.path.join(direct_parent, "cgroup.subtree_control"), "w", encoding="ascii") as f:
        f.write(enable)  # direct_parent is this suite's own cgroup; undone below
    os.mkdir(ours, 0o755)
    with open(os.path.join(ours, "cgroup.subtree_control"), "w", encoding="ascii") as f:
        f.write(enable)
    lab = Lab("direct", socket_dir, stage, engine_credentials, direct_parent=ours)
    try:
        launcher = DirectCgroupLauncher(ours, socket_dir, engine=engine_credentials, log_dir=socket_dir)
        launched = lab.launch(_storm_spec, launcher=launcher,
                              limits=EngineLimits(pids=STORM, memory=256 * MiB, cpu=0.5, core=0))
        held = launched.handle.limits
        assert {name: h.via for name, h in held.items()} == _expected_via(wanted)
        for file, value in (("pids.max", str(STORM)), ("memory.max", str(256 * MiB)), ("cpu.max", "50000 100000")):
            assert _read(os.path.join(launched.engine_path_host, file)) == value
        _check_rlimits(launched.ref.engine.pid, _expected_via(wanted), EngineLimits(pids=STORM, core=0))
        _storm_is_capped_and_the_stop_proves(lab, launched, STORM)
    finally:
        problems = lab.cleanup()
        remove_cgroup(ours)
        with open(os.path.join(direct_parent, "cgroup.subtree_control"), "w", encoding="ascii") as f:
            f.write(" ".join(f"-{c}" for c in sorted(wanted)))
    assert not problems, problems
