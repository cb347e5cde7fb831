"""The engine's limits: what a launch sets (``EngineLimits``, with its defaults ``DEFAULT_PIDS``,
``DEFAULT_MEMORY``, ``DEFAULT_CPUS``, ``DEFAULT_DATA``, ``DEFAULT_ADDRESS_SPACE``, ``DEFAULT_CORE``) and where
each one holds (``LimitHeld``).

``launch(..., limits=EngineLimits(...))`` asks for them; ``handle.limits`` says, per limit, whether a cgroup
file, an rlimit or nothing holds it (``held_to_dict`` is its JSON form, the controller's binding record;
``held_from_dict`` reads it back). README "Limits".
"""

from __future__ import annotations

from . import _limits
from ._limits import *  # noqa: F403

__all__: list[str] = []
__all__ += _limits.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
