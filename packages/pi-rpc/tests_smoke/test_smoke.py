"""The seed README's smoke test, through the engine link: the pinned binary, sealed, under env -i in a
scratch HOME and agent directory with no auth file reachable, answering get_state, get_commands,
clear_queue, abort and get_tree with no prompt; the /llama entry of get_commands pinned."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from pathlib import Path

from mosaic.pi_rpc import EngineLink, sealed_engine_argv
from mosaic.pi_rpc.link import CommandOutcome, CommandWritten, EngineEvent, OutcomeKnown
from mosaic.pi_rpc.testing.netns import interfaces, outside_unreachable

WAIT = 30.0

# Seed README "Findings against pinned Pi": one inline extension command under the seal. Pinned here so a
# change shows (FACTS.md (b), get_commands row).
LLAMA = {"name": "llama", "description": "Manage llama.cpp router models", "source": "extension",
         "sourceInfo": {"path": "<inline:llama.cpp>", "source": "inline", "scope": "temporary", "origin": "top-level"}}

AUTH_NAMES = ("auth.json", ".pi", ".claude", ".config", ".netrc", ".npmrc")


def _no_auth_reachable(home: Path, agent: Path, env: dict[str, str]) -> None:
    assert list(home.iterdir()) == []
    assert list(agent.iterdir()) == []
    assert set(env) == {"HOME", "PATH", "PI_CODING_AGENT_DIR"}
    assert not any(k.endswith(("_API_KEY", "_TOKEN")) for k in env)
    for name in AUTH_NAMES:
        assert not (home / name).exists() and not (agent / name).exists()


def test_namespace_is_loopback_only() -> None:
    assert interfaces() == ["lo"]
    assert outside_unreachable()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    socket.create_connection(srv.getsockname(), timeout=5).close()
    srv.close()


def test_sealed_smoke_idle_commands_with_no_prompt(pi_dir: Path, tmp_path: Path) -> None:
    home, agent, proj = tmp_path / "home", tmp_path / "agent", tmp_path / "proj"
    for d in (home, agent, proj):
        d.mkdir()
    session = proj / ".pi" / "state" / "seat" / "sessions" / "smoke.jsonl"
    session.parent.mkdir(parents=True)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": str(agent)}
    _no_auth_reachable(home, agent, env)
    argv = sealed_engine_argv(pi_dir, str(session))  # refuses engine-pin-mismatch before spawn

    async def main() -> None:
        link = await EngineLink.spawn(argv, env=env, cwd=str(proj))
        try:
            state = await link.request({"type": "get_state"})
            data = state.response["data"] if state.response else {}
            assert data["isStreaming"] is False and data["messageCount"] == 0
            assert data["sessionFile"] == str(session)
            # No models.json: Pi's placeholder model, never null (FACTS.md (d)).
            assert data["model"]["id"] == "unknown" and data["model"]["provider"] == "unknown"
            assert "sessionName" not in data
            commands = await link.request({"type": "get_commands"})
            assert commands.response is not None
            assert commands.response["data"] == {"commands": [LLAMA]}
            clear = link.send({"type": "clear_queue"})
            ev = await link.next_event(WAIT)
            # Skip what came before: the earlier commands' outcomes and the write side's CommandWritten.
            while isinstance(ev, (OutcomeKnown, CommandWritten)) and ev.command is not clear or (
                    isinstance(ev, CommandWritten) and ev.command is clear):
                ev = await link.next_event(WAIT)
            # queue_update (empty) before the clear_queue response (agent-session.js 1195-1203)
            assert isinstance(ev, EngineEvent) and ev.record == {"type": "queue_update", "steering": [],
                                                                  "followUp": []}
            await link.outcome(clear)
            assert clear.response is not None and clear.response["data"] == {"steering": [], "followUp": []}
            abort = await link.request({"type": "abort"})
            assert abort.response == {"id": abort.id, "type": "response", "command": "abort", "success": True}
            tree = await link.request({"type": "get_tree"})
            assert tree.response is not None
            assert [n["entry"]["type"] for n in tree.response["data"]["tree"]] == ["thinking_level_change"]
            sent = (state, commands, clear, abort, tree)
            assert all(c.outcome is CommandOutcome.ACKNOWLEDGED for c in sent)
            assert link.core.in_flight == ()  # acknowledged commands are not kept by the core
            assert link.core.poisoned is None
            link.close_stdin()
            assert await link.wait(WAIT) == 0
        finally:
            await link.aclose()

    asyncio.run(main())
    assert not session.exists()  # no message: nothing written (FACTS.md (d) K2)
    # Pi wrote these two into the agent dir, mode 600 (seed README "Findings against pinned Pi").
    for name in ("auth.json", "models-store.json"):
        p = agent / name
        assert json.loads(p.read_text()) == {}
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert list(home.iterdir()) == [] or all(p.name != ".pi" for p in home.iterdir())
