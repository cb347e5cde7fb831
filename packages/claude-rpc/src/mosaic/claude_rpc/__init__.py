"""mosaic.claude_rpc: the pinned Claude Code 2.1.283, its installer and the protocol sources by hash.

    from mosaic.claude_rpc import ClaudeEngineLink, ensure_claude, seal_launch
    claude = ensure_claude(".cache/claude")          # npm ci --ignore-scripts of the committed pin, verified
    launch = seal_launch(claude.root, session_id=sid, resume=False, scratch=scratch, cwd=cwd)  # L7 first
    link = await ClaudeEngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd, expected_session_id=sid)

What a consumer needs is here (`__all__`); the rest is in named public modules:

* `mosaic.claude_rpc.seal`: the seal (argv allow-list, `env -i` environment, the managed-policy check) and
  `seal_launch`/`check_launch` (the pin at construction and at bind);
* `mosaic.claude_rpc.link`: `ClaudeLinkCore` (sans-io) and `ClaudeEngineLink` (asyncio) over stream-json,
  with their events; `mosaic.claude_rpc.framing`: the strict line decoder; `mosaic.claude_rpc.resume`: the
  leaf rule and the load check's transcript half;
* `mosaic.claude_rpc.pin`: the pin as a refusal (`check_binary`, `check_pin`, `engine_binary`,
  `pin_mismatches`); refusals are `ClaudeRpcRefusal` values (`engine-pin-mismatch`), a subclass of
  `mosaic.safe_open.Refusal` like every Mosaic refusal;
* `mosaic.claude_rpc.install`: the installer (`install_claude`, `ensure_claude`, `verify_claude`), the
  pinned versions and hashes, and `quiet_env` (the environment every run of the binary gets);
* `mosaic.claude_rpc.sources`: the protocol sources by hash (`fetch_sources`, `verify_fetched_sources`);
* `mosaic.claude_rpc.testing`: the scripted Anthropic Messages server, the loopback-only namespace, the
  makers of the committed recordings and transcript trees, the replay harness, the fake engine and the
  conformance suite.

The names load on first use (PEP 562): importing the package loads no subprocess machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._install import ClaudeInstall, ensure_claude
    from ._link import ClaudeLinkCore
    from ._pin import check_binary, check_pin, engine_binary
    from ._refusal import ClaudeRpcRefusal
    from ._seal import SealedLaunch, check_launch, seal_launch
    from ._shell import ClaudeEngineLink

# name -> the private module that defines it, imported on first access.
_LAZY = {
    "ClaudeEngineLink": "._shell",
    "ClaudeInstall": "._install",
    "ClaudeLinkCore": "._link",
    "ClaudeRpcRefusal": "._refusal",
    "SealedLaunch": "._seal",
    "check_binary": "._pin",
    "check_launch": "._seal",
    "check_pin": "._pin",
    "engine_binary": "._pin",
    "ensure_claude": "._install",
    "seal_launch": "._seal",
}

__all__ = ["ClaudeEngineLink", "ClaudeInstall", "ClaudeLinkCore", "ClaudeRpcRefusal", "SealedLaunch", "check_binary",
           "check_launch", "check_pin", "engine_binary", "ensure_claude", "seal_launch"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
