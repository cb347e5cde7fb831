"""The seal for Claude (README "The seal"): the only argv, environment and host a Mosaic engine may run the
pinned binary with. `check_seal(args)`, `check_env(env, scratch=)`, `check_host()` and `check_launch(launch)`
return `None` or the `unsealed-engine` refusal; `build_sealed_args(...)`, `sealed_env(...)` and
`seal_launch(...)` (the pin check first: `engine-pin-mismatch`) make them, as a `SealedLaunch`.
`SEALED_FLAGS`, `SESSION_FLAGS`, `OPTIONAL_FLAGS`, `REQUIRED_ENV`, `OPTIONAL_ENV`, `SWITCHES`,
`EMPTY_MCP_CONFIG` and `MANAGED_POLICY_DIR` are the allow-lists; `is_session_uuid` the session id's form.
"""

from __future__ import annotations

from ._seal import (
    EMPTY_MCP_CONFIG,
    MANAGED_POLICY_DIR,
    OPTIONAL_ENV,
    OPTIONAL_FLAGS,
    REQUIRED_ENV,
    SEALED_FLAGS,
    SESSION_FLAGS,
    SWITCHES,
    SealedLaunch,
    build_sealed_args,
    check_env,
    check_host,
    check_launch,
    check_seal,
    is_session_uuid,
    seal_launch,
    sealed_env,
)

__all__ = [
    "EMPTY_MCP_CONFIG",
    "MANAGED_POLICY_DIR",
    "OPTIONAL_ENV",
    "OPTIONAL_FLAGS",
    "REQUIRED_ENV",
    "SEALED_FLAGS",
    "SESSION_FLAGS",
    "SWITCHES",
    "SealedLaunch",
    "build_sealed_args",
    "check_env",
    "check_host",
    "check_launch",
    "check_seal",
    "is_session_uuid",
    "seal_launch",
    "sealed_env",
]


def __dir__() -> list[str]:
    return sorted(__all__)
