"""The seal for Claude (README "The seal"): the argv is an allow-list, the environment is `env -i` with the
three switches and a private temporary directory inside the scratch, the managed policy directory refuses
the launch, and the pin is checked at construction (L7; the brief's I4 mutant "the pin check is skipped") and
again at bind. Every refusal is `unsealed-engine` (or `engine-pin-mismatch`). The smoke suite proves on the
binary what each required flag keeps out (tests_smoke/test_seal_real.py)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from helpers import fake_install, stand_in

from mosaic.claude_rpc import ClaudeRpcRefusal
from mosaic.claude_rpc.seal import (
    EMPTY_MCP_CONFIG,
    REQUIRED_ENV,
    SEALED_FLAGS,
    SWITCHES,
    SealedLaunch,
    build_sealed_args,
    check_env,
    check_host,
    check_launch,
    check_seal,
    seal_launch,
    sealed_env,
)
from mosaic.claude_rpc.testing.fake_engine import fake_engine_command

SID = "00000000-0000-4000-8000-00000000005e"
NEW = [*SEALED_FLAGS, "--session-id", SID]


def code(refusal: ClaudeRpcRefusal | None) -> str | None:
    return None if refusal is None else refusal.code


def test_the_sealed_args_are_exactly_the_allow_list_for_a_new_and_a_resumed_session() -> None:
    assert list(SEALED_FLAGS) == ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
                                  "--permission-prompt-tool", "stdio", "--setting-sources", "", "--strict-mcp-config",
                                  "--mcp-config", EMPTY_MCP_CONFIG]
    assert build_sealed_args(session_id=SID, resume=False) == NEW
    assert build_sealed_args(session_id=SID, resume=True) == [*SEALED_FLAGS, "--resume", SID]
    full = build_sealed_args(session_id=SID, resume=True, model="claude-opus-5-5", partial_messages=True)
    assert full[len(SEALED_FLAGS) + 2:] == ["--model", "claude-opus-5-5", "--include-partial-messages"]
    assert check_seal(full) is None and check_seal([*NEW, "--include-partial-messages", "--model", "m"]) is None


@pytest.mark.parametrize("args", [
    [*NEW, "--settings", "{}"],
    [*NEW, "--fork-session"],
    [*NEW, "--resume-session-at", SID],
    [*NEW, "--continue"],
    [*NEW, "--add-dir", "/"],
    [*NEW, "--permission-mode", "acceptEdits"],
    [*NEW, "--dangerously-skip-permissions"],
    [*NEW, "--allowedTools", "Bash"],
    [*NEW, "--mcp-config", '{"mcpServers":{"x":{"command":"/bin/true"}}}'],
    [*NEW, "--model=claude-opus-5-5"],
    [*NEW, "--model", "-x"],
    [*NEW, "--model", ""],
    [*NEW, "--model", "a", "--model", "b"],
    [*NEW, "--include-partial-messages", "--include-partial-messages"],
    [*NEW, "hello"],
    [*NEW, "--session-id", SID],
    [*NEW, "--resume", SID],
    [*SEALED_FLAGS],
    [*SEALED_FLAGS, "--session-id", SID.upper().replace("0", "A")],
    [*SEALED_FLAGS, "--session-id", "not-a-uuid"],
    [*SEALED_FLAGS, "--session-id", SID + " "],
    [*SEALED_FLAGS[:-1], '{"mcpServers":{"x":{}}}', "--session-id", SID],
    [*SEALED_FLAGS[:9], "user", *SEALED_FLAGS[10:], "--session-id", SID],
    [*SEALED_FLAGS[:10], *SEALED_FLAGS[12:], "--session-id", SID],
    [SEALED_FLAGS[1], SEALED_FLAGS[0], *SEALED_FLAGS[2:], "--session-id", SID],
    ["--debug", *NEW],
])
def test_anything_outside_the_allow_list_refuses_unsealed_engine(args: list[str]) -> None:
    assert code(check_seal(args)) == "unsealed-engine"


def test_build_sealed_args_refuses_what_check_seal_refuses() -> None:
    for kwargs in ({"session_id": "x", "resume": False}, {"session_id": SID, "resume": False, "model": "--bad"}):
        with pytest.raises(ClaudeRpcRefusal) as info:
            build_sealed_args(**kwargs)  # type: ignore[arg-type]
        assert info.value.code == "unsealed-engine"


def test_the_sealed_environment_is_exactly_the_required_keys_the_switches_and_a_private_tmpdir(tmp_path: Path) -> None:
    scratch = tmp_path / "s"
    env = sealed_env(scratch, base_url="http://127.0.0.1:1", api_key="sk-ant-fake")
    assert set(env) == {*REQUIRED_ENV, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"}
    assert all(env[k] == v for k, v in SWITCHES.items()) and set(SWITCHES) == {
        "DISABLE_AUTOUPDATER", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "CLAUDE_CODE_DISABLE_CLAUDE_MDS"}
    assert env["CLAUDE_CODE_TMPDIR"] == str(scratch / "tmp") and env["HOME"] == str(scratch / "home")
    assert os.stat(env["CLAUDE_CODE_TMPDIR"]).st_mode & 0o777 == 0o700
    assert check_env(env, scratch=scratch) is None
    assert "ANTHROPIC_API_KEY" not in sealed_env(tmp_path / "t")  # no key unless one is given


@pytest.mark.parametrize("change", [
    {"ANTHROPIC_AUTH_TOKEN": "x"}, {"CLAUDE_CODE_MANAGED_SETTINGS_PATH": "/x"}, {"LD_PRELOAD": "/x.so"},
    {"XDG_RUNTIME_DIR": "/run/user/0"}, {"DISABLE_AUTOUPDATER": "0"}, {"CLAUDE_CODE_DISABLE_CLAUDE_MDS": ""},
    {"PATH": "bin:/usr/bin"}, {"HOME": "relative"}, {"CLAUDE_CONFIG_DIR": "/a/../b"},
])
def test_any_other_key_value_or_path_in_the_environment_refuses(change: dict[str, str], tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "s")
    assert code(check_env({**env, **change})) == "unsealed-engine"


def test_a_missing_key_refuses(tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "s")
    for key in REQUIRED_ENV:
        assert code(check_env({k: v for k, v in env.items() if k != key})) == "unsealed-engine", key


def test_the_tmpdir_must_be_a_private_real_directory_inside_the_scratch(tmp_path: Path) -> None:
    scratch = tmp_path / "s"
    env = sealed_env(scratch)
    tmp = Path(env["CLAUDE_CODE_TMPDIR"])
    assert code(check_env(env, scratch=tmp_path / "elsewhere")) == "unsealed-engine"
    tmp.chmod(0o755)
    assert code(check_env(env)) == "unsealed-engine"
    tmp.chmod(0o700)
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = scratch / "linked"
    link.symlink_to(real)
    assert code(check_env({**env, "CLAUDE_CODE_TMPDIR": str(link)})) == "unsealed-engine"
    assert code(check_env({**env, "CLAUDE_CODE_TMPDIR": str(scratch / "absent")})) == "unsealed-engine"


def test_the_managed_policy_directory_refuses_while_it_exists(tmp_path: Path) -> None:
    policy = tmp_path / "etc-claude-code"
    assert check_host(policy) is None
    policy.mkdir()
    refusal = check_host(policy)
    assert code(refusal) == "unsealed-engine" and refusal is not None and "managed policy" in refusal.message
    policy.rmdir()
    policy.symlink_to(tmp_path / "nowhere")  # a dangling link is still there for the binary to try
    assert code(check_host(policy)) == "unsealed-engine"


def test_L7_I4_seal_launch_checks_the_pin_before_it_makes_anything(tmp_path: Path) -> None:
    install = fake_install(tmp_path / "claude")
    scratch = tmp_path / "s"
    with pytest.raises(ClaudeRpcRefusal) as info:
        seal_launch(install, session_id=SID, resume=False, scratch=scratch, cwd=tmp_path)
    assert info.value.code == "engine-pin-mismatch"
    assert not scratch.exists()  # refused before the environment was made


def test_a_launch_of_the_fake_is_not_pinned_and_is_checked_again_at_bind(tmp_path: Path) -> None:
    launch = seal_launch(None, session_id=SID, resume=True, scratch=tmp_path / "s", cwd=tmp_path,
                         command=fake_engine_command(), policy_dir=tmp_path / "no-policy")
    assert isinstance(launch, SealedLaunch) and not launch.pinned and launch.resume
    assert launch.argv == [*fake_engine_command(), *SEALED_FLAGS, "--resume", SID]
    assert check_launch(launch, policy_dir=tmp_path / "no-policy") is None
    changed = [
        dataclasses.replace(launch, args=(*launch.args, "--fork-session")),
        dataclasses.replace(launch, env={**launch.env, "ANTHROPIC_AUTH_TOKEN": "x"}),
        dataclasses.replace(launch, session_id="00000000-0000-4000-8000-0000000000ff"),
        dataclasses.replace(launch, resume=False),
    ]
    for bad in changed:
        assert code(check_launch(bad, policy_dir=tmp_path / "no-policy")) == "unsealed-engine"
    (tmp_path / "policy").mkdir()
    assert code(check_launch(launch, policy_dir=tmp_path / "policy")) == "unsealed-engine"
    with pytest.raises(ClaudeRpcRefusal):
        seal_launch(None, session_id=SID, resume=True, scratch=tmp_path / "s", cwd=tmp_path,
                    command=fake_engine_command(), policy_dir=tmp_path / "policy")


def test_L7_at_bind_a_pinned_launch_whose_binary_changed_refuses_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    binary = tmp_path / "claude"
    stand_in(binary, prints="2.1.283 (Claude Code)", marker=marker)
    launch = SealedLaunch((str(binary),), tuple(NEW), sealed_env(tmp_path / "s"), str(tmp_path), SID, False, True,
                          str(tmp_path / "s"))
    assert code(check_launch(launch, policy_dir=tmp_path / "no-policy")) == "engine-pin-mismatch"
    assert not marker.exists()


def test_the_private_temp_directory_is_the_owners_a_contained_engine_runs_as(tmp_path: Path) -> None:
    """`owner=`: the uid a contained engine runs as (another than its controller's). The private directory
    must be that uid's: ours is refused for it, and it is refused for us (check_launch at bind too)."""
    env = sealed_env(tmp_path / "s")
    other = os.geteuid() + 1
    assert check_env(env) is None
    assert code(check_env(env, owner=other)) == "unsealed-engine"
    assert check_env(env, owner=os.geteuid()) is None
    launch = SealedLaunch(tuple(fake_engine_command()), tuple(NEW), env, str(tmp_path), SID, False, False,
                          str(tmp_path / "s"), other)
    assert code(check_launch(launch, policy_dir=tmp_path / "no-policy")) == "unsealed-engine"
    ours = dataclasses.replace(launch, owner=None)
    assert check_launch(ours, policy_dir=tmp_path / "no-policy") is None


def test_an_owner_range_checks_ours_or_a_range_uid_and_gives_nothing_away(tmp_path: Path) -> None:
    """`owner=range(...)`: the uid of each launch is allocated later from that range (the controller's engine
    uid per execution). The seal then makes the directories as ours and gives them to nobody; the private
    directory passes as ours or a range uid's, and nobody else's; `check_launch` with the one uid decides."""
    other = os.geteuid() + 1
    uids = range(other, other + 4)
    env = sealed_env(tmp_path / "s", owner=uids)
    for key in ("HOME", "CLAUDE_CODE_TMPDIR", "CLAUDE_CONFIG_DIR"):
        assert os.stat(env[key]).st_uid == os.geteuid()  # nothing given away at construction
    assert check_env(env, owner=uids) is None
    assert code(check_env(env, owner=range(other + 10, other + 12))) is None  # ours passes whatever the range
    launch = SealedLaunch(tuple(fake_engine_command()), tuple(NEW), env, str(tmp_path), SID, False, False,
                          str(tmp_path / "s"), uids)
    assert check_launch(launch, policy_dir=tmp_path / "no-policy") is None
    exact = dataclasses.replace(launch, owner=other)
    assert code(check_launch(exact, policy_dir=tmp_path / "no-policy")) == "unsealed-engine"  # not yet the uid's
    if os.geteuid() == 0:
        os.chown(env["CLAUDE_CODE_TMPDIR"], other + 1, -1)
        assert check_env(env, owner=uids) is None  # a range uid's (an earlier launch's)
        assert code(check_env(env, owner=range(other + 2, other + 4))) == "unsealed-engine"  # not one of these
        assert code(check_launch(exact, policy_dir=tmp_path / "no-policy")) == "unsealed-engine"  # another uid's
        os.chown(env["CLAUDE_CODE_TMPDIR"], other, -1)
        assert check_launch(exact, policy_dir=tmp_path / "no-policy") is None
