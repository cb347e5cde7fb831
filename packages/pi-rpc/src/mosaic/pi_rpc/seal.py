"""The seal and the pin: which Pi runs, and with which arguments (README "The pin and the seal").

The seal: `check_seal(argv)` and `check_pre_args(pre_args)` refuse anything outside the allow-list
(`SEALED_FLAGS`, then only `OPTIONAL_FLAGS` with a plain value, a thinking level from `THINKING_LEVELS`);
`build_sealed_argv(...)` makes a sealed argv. The pin: `check_pin(pi_dir)` (the installer's `verify_pi`
plus `BUNDLE_MANIFEST_SHA256`, `CHORD_PACKAGE` and `CHORD_INTEGRITY` from FACTS §0) and
`pin_mismatches(pi_dir)`; `sealed_engine_argv(pi_dir, session, ...)` checks the pin before it returns an
argv. The fixture extension (issue 33, test seats only, off by default): `fixture_extension=True` on
`check_seal`, `build_sealed_argv`, `sealed_engine_argv`, `check_pin` admits exactly `--extension
FIXTURE_EXTENSION_PATH` holding `FIXTURE_EXTENSION_SHA256` (and pins the loader's files,
`FIXTURE_LOADER_SHA256`); `check_fixture_env(env)` wants `FIXTURE_EXTENSION_ENV` in the engine's environment. Refusals are `mosaic.pi_rpc.PiRpcRefusal` (`unsealed-engine`, `engine-pin-mismatch`); `CODES` is its
code table (code -> reconcile), `PiRpcRefusal.CODES`.
"""

from __future__ import annotations

from ._pin import (
    BUNDLE_MANIFEST_SHA256,
    CHORD_INTEGRITY,
    CHORD_PACKAGE,
    FIXTURE_LOADER_SHA256,
    check_pin,
    pin_mismatches,
    sealed_engine_argv,
)
from ._refusal import CODES
from ._seal import (
    FIXTURE_EXTENSION_ENV,
    FIXTURE_EXTENSION_PATH,
    FIXTURE_EXTENSION_SHA256,
    OPTIONAL_FLAGS,
    SEALED_FLAGS,
    THINKING_LEVELS,
    build_sealed_argv,
    check_fixture_env,
    check_pre_args,
    check_seal,
)

__all__ = [
    "BUNDLE_MANIFEST_SHA256",
    "CHORD_INTEGRITY",
    "CHORD_PACKAGE",
    "CODES",
    "FIXTURE_EXTENSION_ENV",
    "FIXTURE_EXTENSION_PATH",
    "FIXTURE_EXTENSION_SHA256",
    "FIXTURE_LOADER_SHA256",
    "OPTIONAL_FLAGS",
    "SEALED_FLAGS",
    "THINKING_LEVELS",
    "build_sealed_argv",
    "check_fixture_env",
    "check_pin",
    "check_pre_args",
    "check_seal",
    "pin_mismatches",
    "sealed_engine_argv",
]


def __dir__() -> list[str]:
    return sorted(__all__)
