"""The engine's limits without a cgroup (README "Limits"): the decision table, the shim's writer on a
directory tree shaped like a cgroup (every write it makes recorded), and the value objects.

``decide``, ``apply_cgroup`` and ``settle`` are the limits' mechanism (public in ``mosaic.cgroup_cohort.limits``;
the writes are recorded through ``cgroupfs.write_value``, which the writer calls); testing them is the point
here. The real kernel (engine/'s files, /proc/<pid>/limits, a fork storm) is tests_cohort/test_limits.py.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from mosaic.cgroup_cohort import EngineLimits
from mosaic.cgroup_cohort import cgroupfs as cg
from mosaic.cgroup_cohort.internals import LIMITS, apply_cgroup, decide, default_data, rlimits_of, settle
from mosaic.cgroup_cohort.limits import (
    DEFAULT_ADDRESS_SPACE,
    DEFAULT_DATA,
    DEFAULT_MEMORY,
    DEFAULT_PIDS,
    LimitHeld,
    held_from_dict,
    held_to_dict,
)

GiB = 1 << 30
ALL = frozenset({"pids", "memory", "cpu"})
NONE: frozenset[str] = frozenset()
ASKED = EngineLimits(pids=64, memory=GiB, address_space=8 * GiB, cpu=1.5, core=0, data=2 * GiB)

# The decision table: what the unit is offered (None: no cgroup at all, the process-group launcher), whether
# the engine's kuid owns engine/'s files (or is root), whether it is root -> for pids, memory, data, cpu,
# core: where the limit holds and whether the engine can lift it (data and core have no cgroup form: always
# the rlimit, liftable only by root).
TABLE = [
    # a root shim, the engine on its own uid: the cgroup wherever the parent offers it
    ("all offered, dedicated uid", ALL, False, False,
     [("cgroup", False), ("cgroup", False), ("rlimit", False), ("cgroup", False), ("rlimit", False)]),
    ("pids offered only", frozenset({"pids"}), False, False,
     [("cgroup", False), ("rlimit", False), ("rlimit", False), ("none", False), ("rlimit", False)]),
    ("memory and cpu offered", frozenset({"memory", "cpu", "hugetlb"}), False, False,
     [("rlimit", False), ("cgroup", False), ("rlimit", False), ("cgroup", False), ("rlimit", False)]),
    # this host: cgroup2 offers only hugetlb (facts §1)
    ("nothing offered (this host)", frozenset({"hugetlb"}), False, False,
     [("rlimit", False), ("rlimit", False), ("rlimit", False), ("none", False), ("rlimit", False)]),
    ("no cgroup (process group)", None, False, False,
     [("rlimit", False), ("rlimit", False), ("rlimit", False), ("none", False), ("rlimit", False)]),
    # the same-uid scope: the engine could rewrite engine/'s files, so an rlimit it cannot raise comes first
    ("all offered, engine owns the files", ALL, True, False,
     [("rlimit", False), ("rlimit", False), ("rlimit", False), ("cgroup", True), ("rlimit", False)]),
    ("nothing offered, engine owns the files", NONE, True, False,
     [("rlimit", False), ("rlimit", False), ("rlimit", False), ("none", False), ("rlimit", False)]),
    # a root engine lifts anything; RLIMIT_NPROC does not apply to it at all
    ("all offered, root engine", ALL, True, True,
     [("cgroup", True), ("cgroup", True), ("rlimit", True), ("cgroup", True), ("rlimit", True)]),
    ("nothing offered, root engine", NONE, True, True,
     [("none", False), ("rlimit", True), ("rlimit", True), ("none", False), ("rlimit", True)]),
    ("no cgroup, root engine", None, True, True,
     [("none", False), ("rlimit", True), ("rlimit", True), ("none", False), ("rlimit", True)]),
]


@pytest.mark.parametrize("case, offered, owns, root, expected", TABLE, ids=[row[0] for row in TABLE])
def test_the_decision_table(case, offered, owns, root, expected):
    held = decide(ASKED, offered=offered, engine_owns_files=owns, engine_root=root)
    assert [(held[name].via, held[name].liftable) for name in LIMITS] == expected, case
    where = {"cgroup": {"pids": "engine/pids.max", "memory": "engine/memory.max", "cpu": "engine/cpu.max"},
             "rlimit": {"pids": "RLIMIT_NPROC", "memory": "RLIMIT_AS", "core": "RLIMIT_CORE", "data": "RLIMIT_DATA"}}
    value = {"cgroup": {"pids": 64, "memory": GiB, "cpu": "150000 100000"},
             "rlimit": {"pids": 64, "memory": 8 * GiB, "core": 0, "data": 2 * GiB}}
    for name in LIMITS:
        h = held[name]
        if h.via == "none":
            assert (h.value, h.where) == (None, None) and h.why
        else:
            assert (h.where, h.value) == (where[h.via][name], value[h.via][name]), (case, name)
        # A limit not in the cgroup says why; one in the cgroup that the engine cannot lift needs no reason.
        assert (h.why is None) == (h.via == "cgroup" and not h.liftable), (case, name, h.why)


def test_why_names_what_was_missing():
    held = decide(ASKED, offered=frozenset({"hugetlb"}), engine_owns_files=False, engine_root=False)
    assert "the parent does not enable the pids controller for the unit" in str(held["pids"].why)
    assert "cgroup.controllers: hugetlb" in str(held["pids"].why)
    assert "no rlimit bounds a rate" in str(held["cpu"].why)
    assert "counts every task of the engine's uid" in str(held["pids"].why)
    assert "not the cohort's memory" in str(held["memory"].why)
    assert "no cgroup controller limits one process's memory" in str(held["data"].why)
    assert "not the cohort's: N processes may take N times it" in str(held["data"].why)
    # The parent's own controllers (read, never written) say whether it could have enabled one.
    held = decide(ASKED, offered=NONE, engine_owns_files=False, engine_root=False,
                  parent_offers=frozenset({"pids", "hugetlb"}))
    assert "the parent has it and does not enable it for its children" in str(held["pids"].why)
    assert "the parent has no memory controller either: hugetlb pids" in str(held["memory"].why)
    held = decide(ASKED, offered=None, engine_owns_files=False, engine_root=False, no_cgroup="no cgroup here")
    assert str(held["memory"].why).startswith("memory.max: no cgroup here")
    held = decide(ASKED, offered=NONE, engine_owns_files=True, engine_root=True)
    assert "RLIMIT_NPROC: the kernel does not apply it to root" in str(held["pids"].why)
    assert "root can raise it" in str(held["memory"].why)


def test_a_controller_that_failed_falls_back_and_says_why():
    held = decide(ASKED, offered=ALL, engine_owns_files=False, engine_root=False,
                  failed={"memory": "writing engine/memory.max failed: Device or resource busy"})
    assert (held["memory"].via, held["memory"].where) == ("rlimit", "RLIMIT_AS")
    assert "Device or resource busy" in str(held["memory"].why)
    assert held["pids"].via == held["cpu"].via == "cgroup"


def test_an_rlimit_is_never_set_above_the_hard_limit_the_engine_inherits():
    held = decide(ASKED, offered=NONE, engine_owns_files=False, engine_root=False,
                  hard={"pids": 50, "memory": -1, "core": 0})
    assert (held["pids"].value, held["memory"].value, held["core"].value) == (50, 8 * GiB, 0)


def test_a_limit_not_asked_holds_nowhere_and_says_so():
    held = decide(EngineLimits(None, None, None, None, None, None), offered=ALL, engine_owns_files=False,
                  engine_root=False)
    assert {h.via for h in held.values()} == {"none"}
    assert "not asked" in str(held["pids"].why) and "not asked" in str(held["core"].why)
    # memory.max not asked, RLIMIT_AS asked: the rlimit stands in even where the controller is offered.
    held = decide(EngineLimits(memory=None), offered=ALL, engine_owns_files=False, engine_root=False)
    assert (held["memory"].via, held["memory"].value) == ("rlimit", DEFAULT_ADDRESS_SPACE)


def test_the_rlimits_to_set_are_exactly_those_held_by_rlimit():
    held = decide(ASKED, offered=frozenset({"pids"}), engine_owns_files=False, engine_root=False)
    assert rlimits_of(held) == [(resource.RLIMIT_AS, 8 * GiB), (resource.RLIMIT_DATA, 2 * GiB),
                                (resource.RLIMIT_CORE, 0)]
    held = decide(ASKED, offered=None, engine_owns_files=False, engine_root=False)
    assert rlimits_of(held) == [(resource.RLIMIT_NPROC, 64), (resource.RLIMIT_AS, 8 * GiB),
                                (resource.RLIMIT_DATA, 2 * GiB), (resource.RLIMIT_CORE, 0)]


def test_the_defaults_and_their_bounds():
    d = EngineLimits()
    assert (d.pids, d.memory, d.address_space, d.core) == (DEFAULT_PIDS, DEFAULT_MEMORY, DEFAULT_ADDRESS_SPACE, 0)
    assert (d.pids, d.memory, d.address_space) == (4096, 4 * GiB, 32 * GiB)
    assert d.cpu == float(max(1, (os.cpu_count() or 1) - 1))
    # Per process, sized from this host's memory: an eighth of MemTotal in whole MiB, at least 1 GiB.
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    assert d.data == DEFAULT_DATA == max(GiB, total // 8 // (1 << 20) * (1 << 20)) == default_data()
    assert (default_data(24 * GiB), default_data(4 * GiB), default_data(16 * GiB + 5)) == (3 * GiB, GiB, 2 * GiB)
    for bad in ({"pids": 0}, {"pids": True}, {"pids": 1 << 23}, {"memory": 1024}, {"address_space": -1},
                {"cpu": 0.001}, {"cpu": "1"}, {"core": -1}, {"pids": 1.5}, {"data": 1024}):
        with pytest.raises(ValueError):
            EngineLimits(**bad)
    assert EngineLimits.from_dict(ASKED.to_dict()) == ASKED
    with pytest.raises(ValueError):
        EngineLimits.from_dict({**ASKED.to_dict(), "extra": 1})


def test_held_limits_round_trip_and_refuse_anything_else():
    held = decide(ASKED, offered=frozenset({"pids"}), engine_owns_files=False, engine_root=False)
    assert held_from_dict(held_to_dict(held)) == held
    for broken in ({k: v for k, v in held_to_dict(held).items() if k != "cpu"},
                   {**held_to_dict(held), "pids": {**held["pids"].to_dict(), "via": "cgroup2"}},
                   {**held_to_dict(held), "cpu": {**held["cpu"].to_dict(), "value": 5}},
                   {**held_to_dict(held), "core": {**held["core"].to_dict(), "where": None}}):
        with pytest.raises(ValueError):
            held_from_dict(broken)
    with pytest.raises(ValueError):
        LimitHeld("none", None, None, True)


# ------------------------------------------------------------------------------------ the shim's writer
def _tree(tmp_path: Path, offered: str) -> tuple[Path, Path, Path]:
    """parent/unit/engine with the control files a cgroup would have, as plain files."""
    parent = tmp_path / "parent"
    unit = parent / "unit.scope"
    engine = unit / "engine"
    engine.mkdir(parents=True)
    (parent / "cgroup.subtree_control").write_text("")
    (parent / "cgroup.controllers").write_text("cpu memory pids hugetlb\n")
    (unit / "cgroup.controllers").write_text(offered + "\n")
    (unit / "cgroup.subtree_control").write_text("")
    for name in ("pids.max", "memory.max", "cpu.max"):
        (engine / name).write_text("")
    return parent, unit, engine


@pytest.fixture
def writes(monkeypatch):
    """Every write of the cgroup writer, as (directory, file, value), still performed."""
    seen: list[tuple[str, str, str]] = []
    real = cg.write_value

    def recording(cgroup, name, value):
        where = os.readlink(f"/proc/self/fd/{cgroup}") if isinstance(cgroup, int) else str(cgroup)
        seen.append((where, name, value))
        real(cgroup, name, value)

    monkeypatch.setattr(cg, "write_value", recording)
    return seen


def _fds(unit: Path, engine: Path) -> tuple[int, int]:
    return os.open(unit, os.O_RDONLY | os.O_DIRECTORY), os.open(engine, os.O_RDONLY | os.O_DIRECTORY)


def test_the_writer_enables_in_the_unit_and_writes_engine_files_only(tmp_path, writes):
    parent, unit, engine = _tree(tmp_path, "cpu memory pids")
    unit_fd, engine_fd = _fds(unit, engine)
    try:
        held = settle(ASKED, unit_fd, engine_fd, engine_owns_files=False, engine_root=False)
    finally:
        os.close(unit_fd)
        os.close(engine_fd)
    assert writes == [(str(unit), "cgroup.subtree_control", "+pids"), (str(engine), "pids.max", "64"),
                      (str(unit), "cgroup.subtree_control", "+memory"), (str(engine), "memory.max", str(GiB)),
                      (str(unit), "cgroup.subtree_control", "+cpu"), (str(engine), "cpu.max", "150000 100000")]
    assert [(held[n].via, held[n].value) for n in LIMITS] == [
        ("cgroup", 64), ("cgroup", GiB), ("rlimit", 2 * GiB), ("cgroup", "150000 100000"), ("rlimit", 0)]
    assert (parent / "cgroup.subtree_control").read_text() == ""  # the parent is read, never written


def test_the_writer_writes_nothing_where_nothing_is_offered(tmp_path, writes):
    _parent, unit, engine = _tree(tmp_path, "hugetlb")
    unit_fd, engine_fd = _fds(unit, engine)
    try:
        held = settle(ASKED, unit_fd, engine_fd, engine_owns_files=False, engine_root=False)
    finally:
        os.close(unit_fd)
        os.close(engine_fd)
    assert writes == []
    assert [held[n].via for n in LIMITS] == ["rlimit", "rlimit", "rlimit", "none", "rlimit"]
    assert "the parent has it and does not enable it" in str(held["pids"].why)  # parent/cgroup.controllers read


def test_a_refused_write_falls_back_to_the_rlimit(tmp_path, writes):
    _parent, unit, engine = _tree(tmp_path, "memory pids")
    (engine / "memory.max").unlink()
    (engine / "memory.max").mkdir()  # the write fails (EISDIR), as a refused one would
    unit_fd, engine_fd = _fds(unit, engine)
    try:
        read, failed = apply_cgroup(unit_fd, engine_fd, decide(ASKED, offered=frozenset({"memory", "pids"}),
                                                                engine_owns_files=False, engine_root=False))
        held = settle(ASKED, unit_fd, engine_fd, engine_owns_files=False, engine_root=False)
    finally:
        os.close(unit_fd)
        os.close(engine_fd)
    assert read == {"pids": "64"} and set(failed) == {"memory"} and "engine/memory.max" in failed["memory"]
    assert (held["pids"].via, held["memory"].via, held["memory"].where) == ("cgroup", "rlimit", "RLIMIT_AS")
    assert "Is a directory" in str(held["memory"].why)


def test_an_unreadable_controllers_file_is_no_cgroup_form_not_a_guess(tmp_path, writes):
    _parent, unit, engine = _tree(tmp_path, "pids")
    (unit / "cgroup.controllers").unlink()
    unit_fd, engine_fd = _fds(unit, engine)
    try:
        held = settle(ASKED, unit_fd, engine_fd, engine_owns_files=False, engine_root=False)
    finally:
        os.close(unit_fd)
        os.close(engine_fd)
    assert writes == [] and held["pids"].via == "rlimit"
    assert "cgroup.controllers is unreadable" in str(held["pids"].why)
