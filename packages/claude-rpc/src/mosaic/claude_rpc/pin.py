"""The pin as a refusal (README "The pin"): `check_binary(path)` is the launch-time L7 check of one
executable (sha256, then `--version`), `check_pin(dir)` checks a whole install, `engine_binary(dir)` returns
the path to launch only after that check, `pin_mismatches(dir)` lists every difference. `CODES` is the
refusal table, `ClaudeRpcRefusal` its class; `BINARY_SHA256` and `VERSION_LINE` the pinned binary.
"""

from __future__ import annotations

from ._install import BINARY_SHA256, VERSION_LINE
from ._pin import check_binary, check_pin, engine_binary, pin_mismatches
from ._refusal import CODES, ClaudeRpcRefusal

__all__ = [
    "BINARY_SHA256",
    "CODES",
    "VERSION_LINE",
    "ClaudeRpcRefusal",
    "check_binary",
    "check_pin",
    "engine_binary",
    "pin_mismatches",
]


def __dir__() -> list[str]:
    return sorted(__all__)
