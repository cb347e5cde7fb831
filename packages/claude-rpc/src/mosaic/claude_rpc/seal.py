"""The seal for Claude (README "The seal"): the only argv, environment and host a Mosaic engine may run the
pinned binary with. `check_seal(args)`, `check_env(env, scratch=)`, `check_host()` and `check_launch(launch)`
return `None` or the `unsealed-engine` refusal; `build_sealed_args(...)`, `sealed_env(...)` and
`seal_launch(...)` (the pin check first: `engine-pin-mismatch`) make them, as a `SealedLaunch`.
`SEALED_FLAGS`, `SESSION_FLAGS`, `OPTIONAL_FLAGS`, `REQUIRED_ENV`, `OPTIONAL_ENV`, `SWITCHES`,
`EMPTY_MCP_CONFIG` and `MANAGED_POLICY_DIR` are the allow-lists; `is_session_uuid` the session id's form.
"""

from __future__ import annotations

from . import _seal
from ._seal import *  # noqa: F403

__all__: list[str] = []
__all__ += _seal.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
