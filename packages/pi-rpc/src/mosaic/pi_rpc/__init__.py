"""mosaic.pi_rpc: the engine link to a sealed, pinned Pi 0.85.1 in RPC mode, and the installer of that Pi.

    from mosaic.pi_rpc import EngineLink, ensure_pi, sealed_engine_argv
    pi = ensure_pi(".cache/pi")                                   # npm ci from the committed pin, verified
    argv = sealed_engine_argv(pi.root, "/abs/session.jsonl")      # the seal; a pin mismatch refuses here
    link = await EngineLink.spawn(argv, env=env, cwd=cwd)         # LF framing, write outcomes, backpressure
    cmd = await link.request({"type": "get_state"})               # cmd.outcome, cmd.response (by id)

What a consumer needs is here (`__all__`); the rest is in named public modules:

* `mosaic.pi_rpc.link`: the link in full: `LinkCore` (sans-io: write outcomes written / acknowledged /
  unknown as one table, `OUTCOME_TABLE`; poison, correlation by id, the two prompt rules of FACTS a5 as
  API; only what is in flight is kept), `EngineLink` (its asyncio shell over two pipe fds, which can drive
  a core someone else owns and bounds its event queue with backpressure), their events and errors;
* `mosaic.pi_rpc.framing`: LF framing (`RecordDecoder`, `encode_record`, `js_json_dumps`): LF only, one CR
  stripped, UTF-8 per record, a record over the cap poisons (brief §1, fixture E2);
* `mosaic.pi_rpc.seal`: the seal and the pin (`check_seal`, `build_sealed_argv`, `check_pin`, ...);
  refusals are `PiRpcRefusal` values (`unsealed-engine`, `engine-pin-mismatch`), a subclass of
  `mosaic.safe_open.Refusal` like every Mosaic refusal;
* `mosaic.pi_rpc.install`: the installer (`install_pi`, `ensure_pi`, `verify_pi`) and the pinned versions;
* `mosaic.pi_rpc.testing`: the fake engine, the scripted model server and the conformance suite.

The names load on first use (PEP 562): importing the package loads neither asyncio nor the installer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._install import ensure_pi
    from ._link import Command, LinkCore
    from ._pin import check_pin, sealed_engine_argv
    from ._refusal import PiRpcRefusal
    from ._shell import EngineLink

# name -> the private module that defines it, imported on first access.
_LAZY = {
    "Command": "._link",
    "EngineLink": "._shell",
    "LinkCore": "._link",
    "PiRpcRefusal": "._refusal",
    "check_pin": "._pin",
    "ensure_pi": "._install",
    "sealed_engine_argv": "._pin",
}

__all__ = [
    "Command",
    "EngineLink",
    "LinkCore",
    "PiRpcRefusal",
    "check_pin",
    "ensure_pi",
    "sealed_engine_argv",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
