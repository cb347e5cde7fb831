"""Engine limits: how many tasks, how much memory and CPU the cohort may take, and no core dumps.

Rules this file keeps (README "Limits"; docs/cgroup-facts.md §1, §2.2, §7.2):

* **A limit goes where the kernel holds it for the whole cohort first.** pids, memory and cpu are cgroup2
  controllers. One is used only when the unit's parent has already enabled it for the unit (the unit's
  ``cgroup.controllers`` lists it): the shim then enables it in the unit's own ``cgroup.subtree_control``
  (the unit is the cgroup this launch created, or the scope systemd delegated to it), writes ``pids.max``,
  ``memory.max`` or ``cpu.max`` in ``engine/`` and reads the file back. Nothing else is written: the
  parent's files and every cgroup above it belong to their owners, and nothing is mounted or remounted (a
  controller bound to cgroup v1, as pids, memory and cpu are on this host, facts §1, stays where it is).
* **Where a controller cannot be had, an rlimit stands in** on the engine process, inherited by every
  process it starts: RLIMIT_NPROC for pids, RLIMIT_AS for memory, none for cpu (RLIMIT_CPU ends a process
  after so many CPU seconds: a lifetime, not a rate). RLIMIT_CORE has no cgroup form: always the rlimit.
  Nor has RLIMIT_DATA, the per-process memory bound (``data``): each process's private writable memory,
  sized from the host's memory by default (RLIMIT_AS, which Pi needs at ~22 GiB, bounds no memory below this
  host's).
  They are set, soft and hard alike, in the engine's own clone3 child between the credential drop and
  execve (``_ffi.spawn``): they hold from the engine's first instruction, no process of the cohort ever
  runs without them, and an engine that is not root cannot raise a hard limit again. prlimit(2) on the
  running engine would leave a window in which it forks unlimited; the ``prlimit`` command would be one
  more exec in front of the argv the pin seals.
* **An rlimit is not a cgroup limit.** RLIMIT_NPROC counts every task (threads too) of the engine's uid
  in its user namespace, the cohort's and any other process's of that uid; RLIMIT_AS bounds each process's
  address space, not the cohort's memory. The kernel does not apply RLIMIT_NPROC to root (uid 0 of the
  initial user namespace).
* **A limit the engine can lift is recorded as liftable.** An engine whose kuid owns the limit files (the
  same-uid scope) can rewrite them; a root engine can rewrite any file and raise any hard rlimit
  (CAP_SYS_RESOURCE). Of a limit's forms (cgroup, then rlimit), the first one the kernel applies and the
  engine cannot lift is taken; else the first one the kernel applies; else none.
* **The record says what holds** (``LimitHeld``): per limit, ``via`` "cgroup" (with the value read back
  from the file), "rlimit" (with the value set) or "none"; where; whether the engine can lift it; and why
  not the cgroup (or why nothing). ``decide`` is pure; ``apply_cgroup`` is the shim's one writer.

The shim's start imports this module before the engine's birth: the standard library (``resource``, a
builtin) and ``cgroupfs`` and ``_record`` only (README "Threads": what a launch costs).
"""

from __future__ import annotations

import os
import resource

from . import cgroupfs as cg
from ._record import Record

# Annotations only (strings here): typing would add ~2 ms to the shim's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# What mosaic.cgroup_cohort.limits offers (it star-imports this list); the mechanism (the decision table,
# the shim's writer, the rlimits, the host's memory) is mosaic.cgroup_cohort.internals'.
__all__ = [
    "DEFAULT_ADDRESS_SPACE",
    "DEFAULT_CORE",
    "DEFAULT_CPUS",
    "DEFAULT_DATA",
    "DEFAULT_MEMORY",
    "DEFAULT_PIDS",
    "EngineLimits",
    "LimitHeld",
    "held_from_dict",
    "held_to_dict",
]

GiB = 1 << 30
MiB = 1 << 20
# The defaults and why (README "Limits"):
# - 4096 tasks: Pi is ~11 threads and a build or test run in a tool call a few hundred more; a fork bomb stops
#   at 1/8 of this host's pid_max (32768), leaving the host and the controller room to stop it.
DEFAULT_PIDS = 4096
# - memory.max 4 GiB for the whole cohort: Pi holds ~110 MiB resident (measured), the rest is for what its tool
#   calls run; the page cache is reclaimed at the limit before anything is killed.
DEFAULT_MEMORY = 4 * GiB
# - RLIMIT_AS 32 GiB per process, only where memory.max cannot hold: Node 22 reserves ~10 GiB of address space
#   per WebAssembly memory (undici's llhttp), one at Pi's start and one at its first model request, and keeps
#   ~21.1 GiB from then on (measured over turns, tool calls and new connections). Pi 0.85.1 dies at start
#   under 11 GiB; under 21 GiB its first model request fails ("Connection error."); at 22 GiB it works
#   (measured). 10 GiB more leave room for V8's heap to grow to its default ceiling. An address space is not
#   memory: this bounds a runaway process, not the cohort's memory.
DEFAULT_ADDRESS_SPACE = 32 * GiB
# - core 0: core_pattern here is "core", a file in the engine's cwd, the user's project; a core holds the
#   conversation and the engine's environment (provider keys).
DEFAULT_CORE = 0
# - RLIMIT_DATA, per process, an eighth of the host's memory (MemTotal), at least 1 GiB: 3 GiB on this 24 GiB
#   host. It counts a process's private writable mappings (heap, thread stacks, anonymous memory: Linux 4.7
#   and later), not the address space it only reserves: Pi 0.85.1 holds ~140 MiB of it (VmData, measured at
#   start and over three turns, beside 11.1 to 22.1 GiB of VmSize), so a tool's runaway process stops at a
#   bound the host can give while Pi keeps the room V8's heap may grow into. Per process, not the cohort's:
#   only memory.max bounds that.
DATA_SHARE = 8
DATA_FLOOR = 1 << 30
CPU_PERIOD = 100_000  # µs: cgroup2's default cpu.max period
CPU_MIN_QUOTA = 1_000  # µs: the smallest quota cpu.max accepts
PIDS_MAX = 1 << 22  # PID_MAX_LIMIT on 64-bit


def _default_cpus() -> float:
    # - every CPU but one (at least one): a busy cohort leaves a CPU to the controller, its force stop and the
    #   other conversations. A rate, so no rlimit stands in for it.
    return float(max(1, (os.cpu_count() or 1) - 1))


DEFAULT_CPUS = _default_cpus()


def host_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """The host's memory in bytes (MemTotal), or None when it cannot be read."""
    try:
        with open(meminfo, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_data(memory: int | None = None) -> int:
    """The per-process memory default (RLIMIT_DATA): an eighth of ``memory`` (the host's, read from
    /proc/meminfo when None), whole MiB, at least 1 GiB; 1 GiB when the host's memory cannot be read."""
    total = host_memory() if memory is None else memory
    if total is None:
        return DATA_FLOOR
    return max(DATA_FLOOR, total // DATA_SHARE // MiB * MiB)


DEFAULT_DATA = default_data()

LIMITS = ("pids", "memory", "data", "cpu", "core")
VIAS = ("cgroup", "rlimit", "none")
# Each limit's forms: the cgroup controller and its file in engine/, the rlimit's name and number.
CGROUP_FORM = {"pids": ("pids", "pids.max"), "memory": ("memory", "memory.max"), "cpu": ("cpu", "cpu.max")}
RLIMIT_FORM = {"pids": ("RLIMIT_NPROC", resource.RLIMIT_NPROC), "memory": ("RLIMIT_AS", resource.RLIMIT_AS),
               "data": ("RLIMIT_DATA", resource.RLIMIT_DATA), "core": ("RLIMIT_CORE", resource.RLIMIT_CORE)}
# What an rlimit standing in for a cgroup limit is not (said in the record's why, so no reader takes it for one).
RLIMIT_IS_NOT = {"pids": "RLIMIT_NPROC counts every task of the engine's uid, not only the cohort's",
                 "memory": "RLIMIT_AS bounds each process's address space, not the cohort's memory",
                 "data": "RLIMIT_DATA bounds each process's private writable memory, not the cohort's: N processes "
                         "may take N times it"}
# Why a limit has no cgroup form at all.
NO_CGROUP_FORM = {"core": "no cgroup controller limits core dumps",
                  "data": "no cgroup controller limits one process's memory (memory.max is the cohort's)"}


def _whole(value: object, low: int, high: int, what: str) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{what} must be None or an integer from {low} to {high}, not {value!r}")


class EngineLimits(Record):
    """The limits to set on one engine's cohort. A frozen value; ``None`` for a field sets nothing for it.

    * ``pids``: tasks (processes and threads): ``pids.max`` of engine/, or RLIMIT_NPROC where that cannot
      hold (then counting every task of the engine's uid, README "Limits");
    * ``memory``: bytes, ``memory.max`` of engine/ (the cohort's memory);
    * ``address_space``: bytes, RLIMIT_AS of every process of the cohort, set only where ``memory.max``
      cannot hold (an address space is not memory: Pi reserves ~21 GiB it never touches);
    * ``cpu``: CPUs (a rate), ``cpu.max`` of engine/ as ``round(cpu * 100000) 100000``; no rlimit form;
    * ``core``: bytes, RLIMIT_CORE (no cgroup form);
    * ``data``: bytes, RLIMIT_DATA of every process of the cohort (no cgroup form): each process's private
      writable memory, whatever cgroup holds the cohort's.

    Defaults: 4096 tasks, 4 GiB, 32 GiB, every CPU of this host but one (at least one), 0, an eighth of this
    host's memory (at least 1 GiB) (README "Limits" says why). Raises ValueError for a value out of range
    (pids 1 to 2^22; memory, address space and data at least 1 MiB; cpu at least 0.01; core at least 0).
    """

    __slots__ = ("pids", "memory", "address_space", "cpu", "core", "data")
    pids: int | None
    memory: int | None
    address_space: int | None
    cpu: float | None
    core: int | None
    data: int | None

    def __init__(self, pids: int | None = DEFAULT_PIDS, memory: int | None = DEFAULT_MEMORY,
                 address_space: int | None = DEFAULT_ADDRESS_SPACE, cpu: float | None = DEFAULT_CPUS,
                 core: int | None = DEFAULT_CORE, data: int | None = DEFAULT_DATA) -> None:
        _whole(pids, 1, PIDS_MAX, "pids")
        _whole(memory, MiB, (1 << 63) - 1, "memory")
        _whole(address_space, MiB, (1 << 63) - 1, "address_space")
        _whole(core, 0, (1 << 63) - 1, "core")
        _whole(data, MiB, (1 << 63) - 1, "data")
        if cpu is not None:
            if not isinstance(cpu, (int, float)) or isinstance(cpu, bool) or not (
                    CPU_MIN_QUOTA <= round(cpu * CPU_PERIOD) <= (1 << 53)):
                raise ValueError(f"cpu must be None or a number of CPUs of at least 0.01, not {cpu!r}")
            cpu = float(cpu)
        self._set(pids=pids, memory=memory, address_space=address_space, cpu=cpu, core=core, data=data)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the shim's ``--limits`` argument)."""
        return {"pids": self.pids, "memory": self.memory, "addressSpace": self.address_space, "cpu": self.cpu,
                "core": self.core, "data": self.data}

    @classmethod
    def from_dict(cls, d: object) -> EngineLimits:
        """Rebuild from ``to_dict()``'s form. Raises ValueError for anything else."""
        keys = {"pids", "memory", "addressSpace", "cpu", "core", "data"}
        if not isinstance(d, dict) or set(d) != keys:
            raise ValueError(f"engine limits must be a JSON object with exactly the keys {sorted(keys)}")
        return cls(d["pids"], d["memory"], d["addressSpace"], d["cpu"], d["core"], data=d["data"])


def cpu_max(cpus: float) -> str:
    """The ``cpu.max`` line for a rate of ``cpus`` CPUs: "<quota> <period>" in µs."""
    return f"{round(cpus * CPU_PERIOD)} {CPU_PERIOD}"


class LimitHeld(Record):
    """Where one limit holds, as the launch left it: ``via`` "cgroup" (``value`` as read back from
    ``where``, a file of engine/), "rlimit" (``value`` as set, ``where`` the rlimit's name) or "none"
    (``value`` and ``where`` None); ``liftable``: the engine itself can lift it; ``why``: why not the
    cgroup form (or why nothing holds; None when the cgroup holds and the engine cannot lift it).

    Raises ValueError for an inconsistent record.
    """

    __slots__ = ("via", "value", "where", "liftable", "why")
    via: str
    value: int | str | None
    where: str | None
    liftable: bool
    why: str | None

    def __init__(self, via: str, value: int | str | None, where: str | None, liftable: bool = False,
                 why: str | None = None) -> None:
        if via not in VIAS:
            raise ValueError(f"via must be one of {VIAS}, not {via!r}")
        if via == "none":
            if value is not None or where is not None or liftable:
                raise ValueError("a limit that holds nowhere has no value, no place and nothing to lift")
        elif not isinstance(value, (int, str)) or isinstance(value, bool) or not isinstance(where, str):
            raise ValueError(f"a limit held by {via} has a value and a place, not {value!r} at {where!r}")
        if not isinstance(liftable, bool) or not (why is None or isinstance(why, str)):
            raise ValueError("liftable is a boolean and why a string or None")
        self._set(via=via, value=value, where=where, liftable=liftable, why=why)

    def to_dict(self) -> dict[str, Any]:
        return {"via": self.via, "value": self.value, "where": self.where, "liftable": self.liftable,
                "why": self.why}

    @classmethod
    def from_dict(cls, d: object) -> LimitHeld:
        """Rebuild from ``to_dict()``'s form. Raises ValueError for anything else."""
        keys = {"via", "value", "where", "liftable", "why"}
        if not isinstance(d, dict) or set(d) != keys:
            raise ValueError(f"a held limit must be a JSON object with exactly the keys {sorted(keys)}")
        return cls(d["via"], d["value"], d["where"], d["liftable"], d["why"])


def held_to_dict(held: Mapping[str, LimitHeld]) -> dict[str, dict[str, Any]]:
    """The JSON form of a launch's limits (the shim's hello, the controller's binding record)."""
    return {name: held[name].to_dict() for name in LIMITS}


def held_from_dict(d: object) -> dict[str, LimitHeld]:
    """A launch's limits from ``held_to_dict``'s form: every limit of ``LIMITS``, nothing else. Raises
    ValueError for anything else (a shim's hello that says less does not describe the cohort)."""
    if not isinstance(d, dict) or set(d) != set(LIMITS):
        raise ValueError(f"the limits must name exactly {list(LIMITS)}")
    return {name: LimitHeld.from_dict(d[name]) for name in LIMITS}


def decide(
    limits: EngineLimits,
    *,
    offered: frozenset[str] | None,
    engine_owns_files: bool,
    engine_root: bool,
    hard: Mapping[str, int] | None = None,
    failed: Mapping[str, str] | None = None,
    no_cgroup: str = "no cgroup",
    parent_offers: frozenset[str] | None = None,
) -> dict[str, LimitHeld]:
    """Where each limit of ``limits`` goes (the module's rules, as a table of inputs; pure).

    ``offered``: the controllers the unit's parent enables for the unit (the unit's ``cgroup.controllers``),
    None when there is no cgroup at all (``no_cgroup`` says why). ``engine_owns_files``: the engine's kuid
    owns engine/'s files or is root (it could rewrite a limit file). ``engine_root``: the engine is uid 0
    of the initial user namespace (RLIMIT_NPROC does not apply; it can raise any rlimit). ``hard``: the hard
    rlimits the engine inherits, by limit name (-1: unlimited); an rlimit is never set above one (the
    engine, no longer root when it is set, could not). ``failed``: controller -> why its cgroup form failed
    when it was tried (the shim decides again without it). ``parent_offers``: the parent's own
    ``cgroup.controllers``, when it could be read, only to say in ``why`` whether the parent has a
    controller it does not enable for the unit, or has none to enable. Returns a ``LimitHeld`` for every name
    of LIMITS.
    """
    return {name: _decide_one(name, limits, offered, engine_owns_files, engine_root, hard or {}, failed or {},
                              no_cgroup, parent_offers) for name in LIMITS}


def _not_offered(controller: str, offered: frozenset[str], parent_offers: frozenset[str] | None) -> str:
    text = (f"the parent does not enable the {controller} controller for the unit (the unit's "
            f"cgroup.controllers: {' '.join(sorted(offered)) or 'empty'}")
    if parent_offers is None:
        return text + ")"
    if controller in parent_offers:
        return text + "; the parent has it and does not enable it for its children, which is its owner's to do)"
    return text + f"; the parent has no {controller} controller either: {' '.join(sorted(parent_offers)) or 'none'})"


def _decide_one(name: str, limits: EngineLimits, offered: frozenset[str] | None, owns: bool, root: bool,
                hard: Mapping[str, int], failed: Mapping[str, str], no_cgroup: str,
                parent_offers: frozenset[str] | None) -> LimitHeld:
    cpu = limits.cpu
    cgroup_value: int | str | None = {"pids": limits.pids, "memory": limits.memory,
                                      "cpu": None if cpu is None else cpu_max(cpu)}.get(name)
    rlimit_value = {"pids": limits.pids, "memory": limits.address_space, "core": limits.core,
                    "data": limits.data}.get(name)
    notes: list[str] = []
    forms: list[LimitHeld] = []  # in order of preference; each one the kernel applies
    if name in CGROUP_FORM:
        controller, file = CGROUP_FORM[name]
        if cgroup_value is None:
            notes.append(f"{file}: not asked")
        elif offered is None:
            notes.append(f"{file}: {no_cgroup}")
        elif controller in failed:
            notes.append(f"{file}: {failed[controller]}")
        elif controller not in offered:
            notes.append(f"{file}: {_not_offered(controller, offered, parent_offers)}")
        else:
            forms.append(LimitHeld("cgroup", cgroup_value, f"engine/{file}", owns,
                                   f"{file}: the engine's uid owns engine/ or is root: it can rewrite the file"
                                   if owns else None))
    else:
        notes.append(NO_CGROUP_FORM[name])
    if name in RLIMIT_FORM:
        rlimit, _number = RLIMIT_FORM[name]
        if rlimit_value is None:
            notes.append(f"{rlimit}: not asked")
        elif name == "pids" and root:
            notes.append(f"{rlimit}: the kernel does not apply it to root")
        else:
            ceiling = hard.get(name, -1)
            value = rlimit_value if ceiling < 0 else min(rlimit_value, ceiling)
            forms.append(LimitHeld("rlimit", value, rlimit, root,
                                   f"{rlimit}: root can raise it (CAP_SYS_RESOURCE)" if root else None))
    else:
        notes.append("no rlimit bounds a rate (RLIMIT_CPU is a lifetime in CPU seconds)")
    chosen = next((f for f in forms if not f.liftable), forms[0] if forms else None)
    if chosen is None:
        return LimitHeld("none", None, None, False, "; ".join(notes))
    if chosen.via == "cgroup" and not chosen.liftable:
        return chosen  # held for the whole cohort, out of the engine's reach: nothing to explain
    # Why not the cgroup form (or why the cgroup form is liftable), why a form was passed over, and what an
    # rlimit standing in for the cgroup form is not.
    why = [*notes, *(str(f.why) for f in forms if f is not chosen and f.why), *([chosen.why] if chosen.why else []),
           *([RLIMIT_IS_NOT[name]] if chosen.via == "rlimit" and name in RLIMIT_IS_NOT else [])]
    return LimitHeld(chosen.via, chosen.value, chosen.where, chosen.liftable, "; ".join(why))


def rlimits_of(held: Mapping[str, LimitHeld]) -> list[tuple[int, int]]:
    """The (resource, value) pairs to set, soft and hard, on the engine before its exec: every limit held by
    an rlimit, in the order of LIMITS."""
    return [(RLIMIT_FORM[name][1], int(held[name].value or 0)) for name in LIMITS
            if name in held and held[name].via == "rlimit"]


def read_controllers(cgroup: int) -> frozenset[str]:
    """The controllers listed in ``cgroup.controllers`` of an O_DIRECTORY fd. Raises OSError."""
    return frozenset(_read(cgroup, "cgroup.controllers").split())


def _read(dir_fd: int, name: str) -> str:
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def apply_cgroup(unit_fd: int, engine_fd: int, plan: Mapping[str, LimitHeld]) -> tuple[dict[str, str], dict[str, str]]:
    """For each limit ``plan`` puts in the cgroup: enable its controller in the unit's
    ``cgroup.subtree_control`` ("+<controller>", which leaves the others as they are), write the value into
    engine/'s file and read it back. The unit and engine/ are the only cgroups written.

    Returns (limit -> the value read back, controller -> why it failed: the file and errno). Never raises
    for a write the kernel refuses; the caller decides again without the failed controllers.
    """
    read: dict[str, str] = {}
    failed: dict[str, str] = {}
    for name in LIMITS:
        held = plan.get(name)
        if held is None or held.via != "cgroup":
            continue
        controller, file = CGROUP_FORM[name]
        step = "cgroup.subtree_control of the unit"
        try:
            cg.write_value(unit_fd, "cgroup.subtree_control", f"+{controller}")
            step = f"engine/{file}"
            cg.write_value(engine_fd, file, str(held.value))
            read[name] = _read(engine_fd, file)
        except OSError as e:
            failed[controller] = f"writing {step} failed: {os.strerror(e.errno or 0)}"
    return read, failed


def held_value(text: str) -> int | str:
    """A limit file's content as recorded: an integer when it is one, else the text ("max", "50000 100000")."""
    return int(text) if text.isdigit() else text


def hard_limits() -> dict[str, int]:
    """This process's hard rlimits by limit name (-1: unlimited): what an engine it starts inherits."""
    return {name: resource.getrlimit(number)[1] for name, (_, number) in RLIMIT_FORM.items()}


def settle(
    limits: EngineLimits,
    unit_fd: int,
    engine_fd: int,
    *,
    engine_owns_files: bool,
    engine_root: bool,
) -> dict[str, LimitHeld]:
    """The shim's step: read what the unit is offered, decide, write the cgroup forms, decide again without
    any that failed, and return what holds (a cgroup form with the value read back). The rlimits are set
    later, in the engine's child (``rlimits_of``). Never raises: an unreadable ``cgroup.controllers`` is
    no cgroup form, said in ``why``."""
    kw: dict[str, Any] = {"engine_owns_files": engine_owns_files, "engine_root": engine_root,
                          "hard": hard_limits()}
    try:
        offered: frozenset[str] | None = read_controllers(unit_fd)
    except OSError as e:
        offered, kw["no_cgroup"] = None, f"the unit's cgroup.controllers is unreadable: {os.strerror(e.errno or 0)}"
    try:  # the parent's controllers, read only to say why one is missing (never written)
        parent_fd = os.open("..", cg.O_DIR, dir_fd=unit_fd)
        try:
            kw["parent_offers"] = read_controllers(parent_fd)
        finally:
            os.close(parent_fd)
    except OSError:
        pass
    plan = decide(limits, offered=offered, **kw)
    read, failed = apply_cgroup(unit_fd, engine_fd, plan)
    if failed:
        plan = decide(limits, offered=offered, failed=failed, **kw)
    return {name: LimitHeld(h.via, held_value(read[name]), h.where, h.liftable, h.why) if h.via == "cgroup" else h
            for name, h in plan.items()}
