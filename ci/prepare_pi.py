#!/usr/bin/env python3
"""Install (or reuse) the pinned Pi 0.85.1 and its Node 22 in a directory, with progress lines.

    .venv/bin/python ci/prepare_pi.py .cache/pi

A first run fetches about 345 MB from the npm registry (`npm ci` of the committed lockfile, 30-40 s here);
`npm ci` replaces what a cut-short one left. How it reports, is interrupted and exits: `ci/engine_fetch.py`.
"""

from __future__ import annotations

import sys
from typing import Any

from engine_fetch import Engine, main

PI_MB = 345


def _calls() -> tuple[Any, Any, Any, Any]:
    from mosaic.pi_rpc import check_pin, ensure_pi  # noqa: PLC0415 - the venv's packages
    from mosaic.pi_rpc.install import PiInstallError, verify_pi  # noqa: PLC0415

    return ensure_pi, check_pin, PiInstallError, verify_pi


PI = Engine(script=__file__, pinned="Pi 0.85.1", fetched="the pinned Pi 0.85.1 and Node 22",
            about=f"about {PI_MB} MB, 30-40 s", install="the Pi install", failed="the pinned Pi could not be installed",
            calls=_calls)

if __name__ == "__main__":
    sys.exit(main(PI, sys.argv[1:]))
