"""``python -m mosaic.pi_rpc.testing.fake_engine <sealed Pi arguments> [--fake-control PATH]``.

A process that speaks pinned Pi 0.85.1's RPC mode (see :mod:`mosaic.pi_rpc.testing._fake_process` for what
it models, the modules it is made of and their Pi files, and :mod:`mosaic.pi_rpc.testing._fake_control`
for the hold points). It takes Pi's sealed arguments (``--mode rpc --no-extensions ... --session <file>
[--model M --provider P --thinking T]``) and its own options: ``--fake-control PATH`` (or env
``MOSAIC_FAKE_PI_CONTROL``), a Unix socket a test listens on, and ``--fake-scenarios MODULE:ATTR``, the
model's scenario table (default: the scripted model server's ``DEFAULT_SCENARIOS``). It needs
``PI_CODING_AGENT_DIR`` and reads ``models.json``/``settings.json`` there, as Pi does.

Two of its parts are public for the tests that hold them to Pi: `js_json_parse` and `JsonParseError`
(V8's ``JSON.parse`` and its exact error messages, recorded from Node 22.23.5) and `SessionFile`, `iso_now`
and `uuidv7` (the session manager's file, tree and ids), and `GET_TREE_MAX_PATH` (the most nodes on one path
whose ``get_tree`` answer the fake writes; past it, Pi's ``Maximum call stack size exceeded``).
"""

from __future__ import annotations

from mosaic.pi_rpc.testing._fake_control import HOLD_POINTS, FakeControl, Held
from mosaic.pi_rpc.testing._fake_process import FakeOptions, parse_args, run_fake_engine
from mosaic.pi_rpc.testing._fake_rpc import GET_TREE_MAX_PATH
from mosaic.pi_rpc.testing._fake_session import SessionFile, iso_now, uuidv7
from mosaic.pi_rpc.testing._jsjson import JsonParseError, js_json_parse
from mosaic.pi_rpc.testing.harness import fake_engine_command

__all__ = ["GET_TREE_MAX_PATH", "HOLD_POINTS", "FakeControl", "FakeOptions", "Held", "JsonParseError", "SessionFile",
           "fake_engine_command", "iso_now", "js_json_parse", "parse_args", "run_fake_engine", "uuidv7"]


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    run_fake_engine()
