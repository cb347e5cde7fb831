"""The controller's rig over a Claude engine (the fake or the real binary) without the lifecycle: pi-rpc's
`EngineLink` shell over `ClaudeWire`, the core on Claude's rules (no `answer_dialogs`: P7 needs none), the
runtime on a private socket. The caller seals the launch (claude-rpc's `seal_launch` or `fake_launch`)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

from mosaic.controller.core import ControllerCore, CoreConfig
from mosaic.controller.engines.claude import CLAUDE_RULES, ClaudeWire
from mosaic.controller.runtime import ControllerRuntime
from mosaic.pi_rpc import EngineLink


@asynccontextmanager
async def claude_controller(argv: Sequence[str], env: Mapping[str, str], cwd: str | os.PathLike[str],
                            sockets: str) -> AsyncIterator[ControllerRuntime]:
    """The controller's runtime over a Claude engine spawned from `argv`; its core is `runtime.core` and its
    wire `wire(runtime)`."""
    wire = CLAUDE_RULES.new_wire(command_bound=30.0)
    assert isinstance(wire, ClaudeWire)
    link = await EngineLink.spawn(list(argv), env=dict(env), cwd=str(cwd), core=wire, clock=time.time)
    try:
        core = ControllerCore(CoreConfig(conversation="claude-conversation", execution="exec-1", binding="binding-1",
                                         incarnation="inc-" + "a" * 32, engine=CLAUDE_RULES), now=time.time(), link=wire)
        assert core.config.answer_dialogs is False
        runtime = ControllerRuntime(core, link, os.path.join(sockets, "c.sock"))
        await runtime.start()
        try:
            yield runtime
        finally:
            await runtime.aclose()
    finally:
        await link.aclose()


def wire(runtime: ControllerRuntime) -> ClaudeWire:
    """The rig's `ClaudeWire` (the core's link)."""
    link = runtime.core.link
    assert isinstance(link, ClaudeWire)
    return link
