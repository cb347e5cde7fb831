"""The supervisor shim: its entry point (``python -m mosaic.cgroup_cohort.shim --help``) and its command line.

The launchers start it, nothing else should (README "The shim"). What they start it with is public: the
boot line (``shim_boot``: ``-I -c SHIM_CODE <roots>``, the roots ``SHIM_ROOTS`` by default), the options
(``shim_args``) and their reading (``parse_args``), and the state the direct route's shim carries across
its exec (``Startup``).
"""

from ._boot import SHIM_CODE, SHIM_ROOTS, shim_args, shim_boot
from ._shim import main, parse_args
from ._shim_state import Startup

__all__ = ["SHIM_CODE", "SHIM_ROOTS", "Startup", "main", "parse_args", "shim_args", "shim_boot"]


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
