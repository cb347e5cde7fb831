"""The pin as a refusal (README "The pin"): `check_binary(path)` is the launch-time L7 check of one
executable (sha256, then `--version`), `check_pin(dir)` checks a whole install, `engine_binary(dir)` returns
the path to launch only after that check, `pin_mismatches(dir)` lists every difference. `CODES` is the
refusal table, `ClaudeRpcRefusal` its class; `BINARY_SHA256` and `VERSION_LINE` the pinned binary.
"""

from __future__ import annotations

from . import _pin, _refusal
from ._install import BINARY_SHA256, VERSION_LINE
from ._pin import *  # noqa: F403
from ._refusal import *  # noqa: F403

__all__: list[str] = []
__all__ += _pin.__all__
__all__ += _refusal.__all__
__all__ += ["BINARY_SHA256", "VERSION_LINE"]


def __dir__() -> list[str]:
    return sorted(__all__)
