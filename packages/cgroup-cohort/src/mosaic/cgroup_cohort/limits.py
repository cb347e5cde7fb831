"""The engine's limits: what a launch sets (``EngineLimits``) and where each one holds (``LimitHeld``).

``launch(..., limits=EngineLimits(...))`` asks for them; ``handle.limits`` says, per limit in ``LIMITS``,
whether a cgroup file, an rlimit or nothing holds it (``held_to_dict`` is its JSON form, the controller's
binding record); ``default_data`` sizes the per-process memory default from the host's memory
(``host_memory``). The mechanism is public too: the pure decision table (``decide``), the shim's one writer
(``apply_cgroup``, ``settle``) and the rlimits an engine's child sets (``rlimits_of``). README "Limits".
"""

from ._limits import (
    CGROUP_FORM,
    CPU_PERIOD,
    DEFAULT_ADDRESS_SPACE,
    DEFAULT_CORE,
    DEFAULT_CPUS,
    DEFAULT_DATA,
    DEFAULT_MEMORY,
    DEFAULT_PIDS,
    LIMITS,
    RLIMIT_FORM,
    EngineLimits,
    LimitHeld,
    apply_cgroup,
    decide,
    default_data,
    hard_limits,
    held_from_dict,
    held_to_dict,
    host_memory,
    rlimits_of,
    settle,
)

__all__ = [
    "CGROUP_FORM",
    "CPU_PERIOD",
    "DEFAULT_ADDRESS_SPACE",
    "DEFAULT_CORE",
    "DEFAULT_CPUS",
    "DEFAULT_DATA",
    "DEFAULT_MEMORY",
    "DEFAULT_PIDS",
    "LIMITS",
    "RLIMIT_FORM",
    "EngineLimits",
    "LimitHeld",
    "apply_cgroup",
    "decide",
    "default_data",
    "hard_limits",
    "host_memory",
    "held_from_dict",
    "held_to_dict",
    "rlimits_of",
    "settle",
]


def __dir__() -> list[str]:
    return sorted(__all__)
