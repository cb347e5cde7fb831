"""How to run the Pi engine (`PiSpec`): the pinned Pi or a test command, sealed, with its environment,
limits and state directories."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mosaic.cgroup_cohort import EngineLimits

from ._adapter import PiEngine

__all__ = ["PiSpec"]


@dataclass(frozen=True)
class PiSpec:
    """How to run the engine, sealed: the pinned Pi in `pi_dir` (the pin is checked before spawn), or a
    test hook `command` (`[program, *pre_args]`: the fake engine; not the pinned engine, so not
    pin-checked, its pre-arguments still are). `env` is exactly the engine's environment. `limits` are the
    engine's task, memory, CPU and core limits, set where the kernel can hold them (cgroup-cohort README
    "Limits"; None: cgroup-cohort's defaults); where each one holds goes on the binding record."""

    env: Mapping[str, str]
    pi_dir: str | None = None
    command: tuple[str, ...] | None = None
    provider: str | None = None
    model: str | None = None
    thinking: str | None = None
    pin_tree: str | None = None  # a command engine's install tree: its content digest enters the binary pin
    limits: EngineLimits | None = None
    # The directories whose content is the engine's (its agent dir, its HOME): with a uid per execution
    # (`EngineUids`), what an earlier execution's uid owns in them is handed to each new one before its
    # launch (systemd's StateDirectory=); each must be inside the fixture root (the guard checks them).
    state_dirs: tuple[str, ...] = ()
    # The seal's one extension (issue 33): pi-rpc's fixture extension, at its exact path and sha256, for a
    # test seat only (the live-session guard keeps every seat inside the fixture root); the environment must
    # then carry JITI_FS_CACHE=false (pi-rpc `check_fixture_env`). Off by default.
    fixture_extension: bool = False

    def engine(self) -> PiEngine:
        """The engine this spec describes, as the lifecycle uses it (the seam's `EngineFactory`)."""
        return PiEngine(self, env=self.env, limits=self.limits, state_dirs=self.state_dirs)
