"""The fake engine's model script for the controller's real-kernel tests (vendored beside the fake, run by
/usr/bin/python3 as the engine uid): the conformance table plus two tool calls a force stop meets.

DAEMON   a bash tool call that starts a setsid() daemon that ignores SIGTERM (it leaves the engine's session
         and process group, K1, and survives the TERM phase, so the kill phase finds it) and answers at
         once with `started <pid>` (setsid(1) in a background job is no group leader: it does not fork, so
         the pid is the daemon's); then the text "daemon started".
LONGTOOL a bash tool call that sleeps 600 s: a tool call still open when the stop comes (K5).
"""

from __future__ import annotations

import json

from mosaic.pi_rpc.testing import Scenario, StreamText, StreamToolCall
from mosaic.pi_rpc.testing.conformance import SCENARIOS as CONFORMANCE


def _tool(command: str, after: str):  # type: ignore[no-untyped-def]
    def respond(req):  # type: ignore[no-untyped-def]
        if req.last_tool_text is not None:
            return StreamText((after,))
        return StreamToolCall(f"call_{req.index}", "bash", (json.dumps({"command": command}),))
    return respond


SCENARIOS = (
    Scenario("daemon", "DAEMON", _tool("setsid sh -c 'trap \"\" TERM; exec sleep 600' >/dev/null 2>&1 < /dev/null & echo started $!",
                   "daemon started"),
             "a setsid daemon"),
    Scenario("longtool", "LONGTOOL", _tool("sleep 600", "slept"), "a tool call that stays open"),
    *CONFORMANCE,
)
