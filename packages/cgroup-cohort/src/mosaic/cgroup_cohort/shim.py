"""The supervisor shim's entry point: ``python -m mosaic.cgroup_cohort.shim --help``.

The launchers start it, nothing else should (README "The shim"); how they start it (the boot line, the
options, the state the direct route's shim carries across its exec) is the package's own, shown to its
tests by ``mosaic.cgroup_cohort.internals``.
"""

from ._shim import main

__all__ = ["main"]


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
