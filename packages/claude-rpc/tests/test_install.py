"""The installer with a stand-in npm (the real `npm ci` of 231 MB is `nox -s claude-smoke`'s): what it runs,
where, and the one-line failures (README "Installer")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import fake_install

from mosaic.claude_rpc.install import NPM_CI_ARGS, ClaudeInstallError, ensure_claude, install_claude, pin_data


def fake_npm(tmp_path: Path, body: str) -> str:
    npm = tmp_path / "bin" / "npm"
    npm.parent.mkdir()
    npm.write_text(f"#!/bin/sh\necho \"$@\" > \"$PWD/npm-args\"\n{body}\n")
    npm.chmod(0o755)
    return str(npm)


def test_install_writes_the_pin_and_runs_npm_ci_without_scripts_in_the_destination(tmp_path: Path) -> None:
    npm = fake_npm(tmp_path, "exit 0")
    dest = tmp_path / "claude"
    with pytest.raises(ClaudeInstallError) as got:
        install_claude(dest, npm=npm)
    # npm "succeeded" but installed nothing: the result does not verify, and says why.
    assert "does not match the pin" in str(got.value) and got.value.mismatches
    assert (dest / "npm-args").read_text().split() == list(NPM_CI_ARGS)
    assert "--ignore-scripts" in NPM_CI_ARGS
    for name in ("package.json", "package-lock.json"):
        assert (dest / name).read_bytes() == pin_data()[name]


def test_a_failing_npm_is_one_error_with_its_last_words(tmp_path: Path) -> None:
    npm = fake_npm(tmp_path, "echo 'npm error 404 Not Found' >&2; exit 1")
    with pytest.raises(ClaudeInstallError) as got:
        install_claude(tmp_path / "claude", npm=npm)
    assert "npm ci failed with exit 1" in str(got.value) and "404 Not Found" in str(got.value)


def test_install_refuses_a_directory_that_is_not_an_install_and_touches_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "claude"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(ClaudeInstallError) as got:
        install_claude(dest, npm=fake_npm(tmp_path, "exit 0"))
    assert "notes.txt" in str(got.value)
    assert sorted(os.listdir(dest)) == ["notes.txt"]


def test_install_without_npm_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ClaudeInstallError, match="npm is not on PATH"):
        install_claude(tmp_path / "claude")


def test_ensure_reinstalls_an_install_that_does_not_verify(tmp_path: Path) -> None:
    root = fake_install(tmp_path / "claude")
    npm = fake_npm(tmp_path, "exit 0")
    with pytest.raises(ClaudeInstallError):
        ensure_claude(root, npm=npm)
    assert (root / "npm-args").exists(), "a stand-in install that does not verify was reused"
