"""Entry point of the supervisor shim: ``python -m mosaic.cgroup_cohort.shim --help``.

See ``_shim.py`` for what it does; the launchers start it, nothing else should.
"""

from ._shim import main

if __name__ == "__main__":
    raise SystemExit(main())
