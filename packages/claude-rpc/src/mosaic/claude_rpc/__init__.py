"""mosaic.claude_rpc: the pinned Claude Code 2.1.283, its installer and the protocol sources by hash.

    from mosaic.claude_rpc import check_binary, ensure_claude, engine_binary
    claude = ensure_claude(".cache/claude")          # npm ci --ignore-scripts of the committed pin, verified
    binary = engine_binary(claude.root)              # the path to launch, after the whole pin check
    refusal = check_binary(binary)                   # L7 at construction and at bind: None or the refusal

What a consumer needs is here (`__all__`); the rest is in named public modules:

* `mosaic.claude_rpc.pin`: the pin as a refusal (`check_binary`, `check_pin`, `engine_binary`,
  `pin_mismatches`); refusals are `ClaudeRpcRefusal` values (`engine-pin-mismatch`), a subclass of
  `mosaic.safe_open.Refusal` like every Mosaic refusal;
* `mosaic.claude_rpc.install`: the installer (`install_claude`, `ensure_claude`, `verify_claude`), the
  pinned versions and hashes, and `quiet_env` (the environment every run of the binary gets);
* `mosaic.claude_rpc.sources`: the protocol sources by hash (`fetch_sources`, `verify_fetched_sources`);
* `mosaic.claude_rpc.testing`: the scripted Anthropic Messages server, the loopback-only namespace, and
  the makers of the committed recordings and transcript trees.

The names load on first use (PEP 562): importing the package loads no subprocess machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._install import ClaudeInstall, ensure_claude
    from ._pin import check_binary, check_pin, engine_binary
    from ._refusal import ClaudeRpcRefusal

# name -> the private module that defines it, imported on first access.
_LAZY = {
    "ClaudeInstall": "._install",
    "ClaudeRpcRefusal": "._refusal",
    "check_binary": "._pin",
    "check_pin": "._pin",
    "engine_binary": "._pin",
    "ensure_claude": "._install",
}

__all__ = ["ClaudeInstall", "ClaudeRpcRefusal", "check_binary", "check_pin", "engine_binary", "ensure_claude"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
