"""The seal on the real binary (docs/claude-2.1.283.md "The seal"): what each required part keeps out.

Markers are planted where the binary looks: ``CLAUDE.md``, ``CLAUDE.local.md``, ``AGENTS.md``, ``.mcp.json``,
``.claude/{settings.json, settings.local.json, skills, commands, agents, rules}`` in the cwd and in its parent
(an ancestor), and ``CLAUDE.md``, ``settings.json``, ``agents/``, ``skills/``, ``commands/``, ``output-styles/``
in ``CLAUDE_CONFIG_DIR``. The settings allow ``Bash(touch *)`` and name a model and a permission mode.

* sealed (``seal_launch``): no marker reaches the model request or the init message, the model and mode are
  the defaults, and ``touch`` still asks (``can_use_tool``);
* unsealed (the recordings' plain stream-json argv), the same tree: the markers reach the model, the planted
  skills, commands and agents are in the init, the planted model is used and nothing asks: the planting is
  real, so the first test can fail;
* the sealed argv without ``--setting-sources ""``: the planted skills and settings are back;
* under ``strace``: the managed policy (``/etc/claude-code/managed-settings.json``) is probed whatever the
  flags, and still there with ``CLAUDE_CODE_MANAGED_SETTINGS_PATH`` set elsewhere (why ``check_host``
  refuses while it exists), and ``/etc/claude-code/CLAUDE.md`` only without ``CLAUDE_CODE_DISABLE_CLAUDE_MDS``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from mosaic.claude_rpc import ClaudeInstall
from mosaic.claude_rpc.seal import SEALED_FLAGS, check_host, seal_launch
from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.drive import FAKE_KEY, STREAM_JSON_ARGS, StreamSession
from mosaic.claude_rpc.testing.recordings import SESSION_UUID, U1, answer_line, lifecycle, user_line

MARK = re.compile(r"MARK-[A-Z]+-[A-Z]+")
PLANTED = {f"{kind}{tag}" for kind in ("plantskill", "plantcmd", "plantagent", "plantmcp") for tag in ("anc", "proj")} \
    | {"userskill", "useragent", "userstyle", "planted"}


def plant(where: Path, tag: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    for name in ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md"):
        (where / name).write_text(f"MARK-{name.split('.')[0].replace('_', '')}-{tag}\n")
    c = where / ".claude"
    (c / "skills" / f"plantskill{tag.lower()}").mkdir(parents=True)
    (c / "skills" / f"plantskill{tag.lower()}" / "SKILL.md").write_text(
        f"---\nname: plantskill{tag.lower()}\ndescription: MARK-SKILL-{tag}\n---\nbody\n")
    (c / "commands").mkdir()
    (c / "commands" / f"plantcmd{tag.lower()}.md").write_text(f"MARK-COMMAND-{tag}\n")
    (c / "agents").mkdir()
    (c / "agents" / f"plantagent{tag.lower()}.md").write_text(
        f"---\nname: plantagent{tag.lower()}\ndescription: MARK-AGENT-{tag}\n---\nprompt\n")
    (c / "rules").mkdir()
    (c / "rules" / "rule.md").write_text(f"MARK-RULE-{tag}\n")
    settings = {"model": f"plant-model-{tag.lower()}", "permissions": {"allow": ["Bash(touch:*)", "Bash(touch *)"],
                                                                        "defaultMode": "acceptEdits"}}
    (c / "settings.json").write_text(json.dumps(settings))
    (c / "settings.local.json").write_text(json.dumps({"permissions": {"allow": ["Bash(touch:*)"]}}))
    (where / ".mcp.json").write_text(json.dumps({"mcpServers": {f"plantmcp{tag.lower()}": {"command": "/bin/false"}}}))


def plant_config(config: Path) -> None:
    (config / "CLAUDE.md").write_text("MARK-CLAUDE-USER\n")
    (config / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(touch:*)"]}}))
    for sub, text in (("agents", "---\nname: useragent\ndescription: MARK-AGENT-USER\n---\np\n"),
                      ("commands", "MARK-COMMAND-USER\n"),
                      ("output-styles", "---\nname: userstyle\ndescription: MARK-STYLE-USER\n---\nMARK-STYLE-USER\n")):
        (config / sub).mkdir()
        (config / sub / "planted.md").write_text(text)
    (config / "skills" / "userskill").mkdir(parents=True)
    (config / "skills" / "userskill" / "SKILL.md").write_text(
        "---\nname: userskill\ndescription: MARK-SKILL-USER\n---\nb\n")


def turn(claude: ClaudeInstall, tmp_path: Path, *, args: list[str] | None = None, prefix: list[str] | None = None,
         drop_switch: bool = False, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Plant the tree, run one `BASH: touch planted` turn (denied if asked); what reached the model and init."""
    proj = tmp_path / "anc" / "proj"
    plant(tmp_path / "anc", "ANC")
    plant(proj, "PROJ")
    with ModelServer() as server:
        launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s", cwd=proj,
                             base_url=server.base_url, api_key=FAKE_KEY)
        plant_config(Path(launch.env["CLAUDE_CONFIG_DIR"]))
        env = dict(launch.env)
        if drop_switch:
            del env["CLAUDE_CODE_DISABLE_CLAUDE_MDS"]
        env.update(extra_env or {})
        argv = [*(prefix or []), *launch.command, *(launch.args if args is None else args)]
        with StreamSession(argv[0], argv[1:], env=env, cwd=proj) as s:
            s.control("r1", {"subtype": "initialize", "hooks": None})
            initialized = s.response_to("r1")["response"]["response"]
            s.send(user_line("BASH: touch planted", U1))
            first = s.wait(lambda o: o.get("type") in ("control_request", "result"))
            asked = first.get("type") == "control_request"
            if asked:
                s.send(answer_line(first["request_id"], {"behavior": "deny", "message": "no"}))
            s.wait(lambda o: o.get("type") == "command_lifecycle" and o.get("state") == "completed")
            s.close()
        init = next(o for o in s.out if o.get("type") == "system" and o.get("subtype") == "init")
        bodies = json.dumps([r.body for r in server.requests if r.route == "/v1/messages"])
        models = sorted({r.model for r in server.requests if r.route == "/v1/messages"})
    names: set[str] = set()
    for value in (init.get("skills"), init.get("slash_commands"), init.get("agents"), init.get("mcp_servers"),
                  initialized.get("commands"), initialized.get("agents"), initialized.get("available_output_styles")):
        for item in value or []:
            names.add(str(item.get("name")) if isinstance(item, dict) else str(item))
    return {"marks": sorted(set(MARK.findall(bodies))), "listed": sorted(names & PLANTED),
            "asked": asked, "models": models, "mode": init.get("permissionMode"), "lifecycle": lifecycle(s),
            "planted_file": (proj / "planted").exists()}


def test_sealed_nothing_planted_reaches_the_model_or_the_init_and_touch_still_asks(claude: ClaudeInstall,
                                                                                   tmp_path: Path) -> None:
    seen = turn(claude, tmp_path)
    assert seen["marks"] == [] and seen["listed"] == []
    assert seen["asked"] is True and seen["planted_file"] is False
    assert seen["models"] == ["claude-opus-5-5"] and seen["mode"] == "default"


def test_unsealed_the_same_tree_reaches_the_model_and_the_init(claude: ClaudeInstall, tmp_path: Path) -> None:
    seen = turn(claude, tmp_path, args=[*STREAM_JSON_ARGS, "--session-id", SESSION_UUID], drop_switch=True)
    for mark in ("MARK-CLAUDE-ANC", "MARK-CLAUDE-PROJ", "MARK-CLAUDE-USER", "MARK-SKILL-PROJ", "MARK-AGENT-USER",
                 "MARK-RULE-ANC"):
        assert mark in seen["marks"], (mark, seen["marks"])
    assert {"plantskillproj", "plantcmdanc", "plantagentproj", "userskill", "useragent"} <= set(seen["listed"])
    assert seen["asked"] is False and seen["models"] == ["plant-model-proj"] and seen["mode"] == "acceptEdits"


def test_without_the_empty_setting_sources_the_planted_settings_and_skills_are_back(claude: ClaudeInstall,
                                                                                     tmp_path: Path) -> None:
    i = SEALED_FLAGS.index("--setting-sources")
    args = [*SEALED_FLAGS[:i], *SEALED_FLAGS[i + 2:], "--session-id", SESSION_UUID]
    seen = turn(claude, tmp_path, args=args)
    assert "plantskillproj" in seen["listed"] and seen["models"] == ["plant-model-proj"]


def test_the_managed_policy_is_probed_whatever_the_flags_and_claude_md_only_without_the_switch(
        claude: ClaudeInstall, tmp_path: Path) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.fail("strace is needed to show what the binary probes (apt-get install strace)")
    assert check_host() is None, "this machine has /etc/claude-code: the seal refuses every launch here"
    probes = {}
    elsewhere = {"CLAUDE_CODE_MANAGED_SETTINGS_PATH": str(tmp_path / "policy-elsewhere")}
    for name, drop, extra in (("sealed", False, None), ("no-switch", True, None), ("path-env", False, elsewhere)):
        trace = tmp_path / f"{name}.trace"
        turn(claude, tmp_path / name, prefix=[strace, "-f", "-qq", "-e", "trace=%file", "-o", str(trace)],
             drop_switch=drop, extra_env=extra)
        text = trace.read_text()
        probes[name] = set(re.findall(r'"(/etc/claude-code[^"]*)"', text))
        if extra is not None:
            assert "policy-elsewhere" not in text  # the variable does not move the policy on this build
    for name in probes:
        assert "/etc/claude-code/managed-settings.json" in probes[name], name
    assert "/etc/claude-code/CLAUDE.md" not in probes["sealed"]
    assert "/etc/claude-code/CLAUDE.md" in probes["no-switch"]
