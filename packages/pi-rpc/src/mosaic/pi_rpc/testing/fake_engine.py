"""``python -m mosaic.pi_rpc.testing.fake_engine <sealed Pi arguments> [--fake-control PATH]``.

A process that speaks pinned Pi 0.85.1's RPC mode (see :mod:`mosaic.pi_rpc.testing._fake_process` for what
it models, the modules it is made of and their Pi files, and :mod:`mosaic.pi_rpc.testing._fake_control`
for the hold points). It takes Pi's sealed arguments (``--mode rpc --no-extensions ... --session <file>
[--model M --provider P --thinking T]``) and its own options: ``--fake-control PATH`` (or env
``MOSAIC_FAKE_PI_CONTROL``), a Unix socket a test listens on, and ``--fake-scenarios MODULE:ATTR``, the
model's scenario table (default: the scripted model server's ``DEFAULT_SCENARIOS``). It needs
``PI_CODING_AGENT_DIR`` and reads ``models.json``/``settings.json`` there, as Pi does.

The parts the tests hold to Pi one by one (V8's ``JSON.parse``, the session manager's file, tree and ids,
the ``get_tree`` depth limit) are shown to this package's tests by ``mosaic.pi_rpc.internals``.
"""

from __future__ import annotations

from mosaic.pi_rpc.testing._fake_control import HOLD_POINTS, FakeControl, Held
from mosaic.pi_rpc.testing._fake_process import FakeOptions, parse_args, run_fake_engine
from mosaic.pi_rpc.testing.harness import fake_engine_command

__all__ = ["HOLD_POINTS", "FakeControl", "FakeOptions", "Held", "fake_engine_command", "parse_args", "run_fake_engine"]


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    run_fake_engine()
