"""The pin as a refusal (brief §8 L7; README "The pin"), held on stand-in executables and a stand-in install.

L7: a binary whose sha256 or version differs refuses `engine-pin-mismatch` and is not launched. The
sha256 is checked first and a file whose bytes differ is never executed, not even for `--version`; only
bytes that match are asked their version. The real binary's side (its sha256 and `--version` pass, a
one-byte change refuses) is in tests_smoke/test_pin_real.py, which runs the binary under the lock.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import REPO, fake_install, stand_in

from mosaic.claude_rpc import ClaudeRpcRefusal, check_binary, check_pin, engine_binary
from mosaic.claude_rpc.install import (
    BINARY_SHA256,
    CLAUDE_INTEGRITY,
    CLAUDE_PACKAGE,
    NATIVE_INTEGRITY,
    NATIVE_PACKAGE,
    VERSION_LINE,
    installed_files,
    pin_data,
    verify_claude,
)
from mosaic.claude_rpc.pin import CODES, pin_mismatches
from mosaic.safe_open import Refusal


def test_L7_a_binary_whose_sha256_differs_refuses_engine_pin_mismatch_and_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    binary = tmp_path / "claude"
    stand_in(binary, prints=VERSION_LINE, marker=marker)  # prints the pinned version: only its bytes differ
    refusal = check_binary(binary)
    assert isinstance(refusal, ClaudeRpcRefusal) and isinstance(refusal, Refusal)
    assert (refusal.code, refusal.reconcile) == ("engine-pin-mismatch", False)
    assert "binary-sha256" in refusal.message and BINARY_SHA256 in refusal.message
    assert not marker.exists(), "a binary whose bytes differ from the pin was executed"


def test_L7_a_binary_whose_version_differs_refuses_engine_pin_mismatch(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    binary = tmp_path / "claude"
    digest = stand_in(binary, prints="2.1.284 (Claude Code)", marker=marker)
    refusal = check_binary(binary, sha256=digest)
    assert refusal is not None and refusal.code == "engine-pin-mismatch"
    assert "binary-version" in refusal.message and "2.1.284 (Claude Code)" in refusal.message
    assert marker.exists()  # its bytes matched, so it was asked its version


def test_L7_matching_bytes_and_version_pass(tmp_path: Path) -> None:
    binary = tmp_path / "claude"
    digest = stand_in(binary, prints=VERSION_LINE, marker=tmp_path / "ran")
    assert check_binary(binary, sha256=digest) is None


def test_L7_a_relative_path_is_the_file_from_the_callers_directory(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`--version` runs in a scratch directory: a relative path (`ci/bootstrap` asks `check_pin(".cache/claude")`)
    still names the file the caller meant, so a matching install passes wherever it is asked from."""
    (tmp_path / "bin").mkdir()
    digest = stand_in(tmp_path / "bin" / "claude", prints=VERSION_LINE, marker=tmp_path / "ran")
    monkeypatch.chdir(tmp_path)
    assert check_binary(Path("bin") / "claude", sha256=digest) is None
    assert (tmp_path / "ran").exists()


def test_L7_a_symlink_a_directory_and_a_missing_file_refuse_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    target = tmp_path / "real"
    digest = stand_in(target, prints=VERSION_LINE, marker=marker)
    link = tmp_path / "claude"
    link.symlink_to(target)
    for path in (link, tmp_path, tmp_path / "absent"):
        refusal = check_binary(path, sha256=digest)
        assert refusal is not None and refusal.code == "engine-pin-mismatch", path
        assert "binary-missing" in refusal.message
    assert not marker.exists()


def test_L7_engine_binary_refuses_before_it_returns_a_path_to_launch(tmp_path: Path) -> None:
    with pytest.raises(ClaudeRpcRefusal) as empty:
        engine_binary(tmp_path / "nowhere")
    assert empty.value.code == "engine-pin-mismatch" and "not-installed" in empty.value.message
    marker = tmp_path / "ran"
    root = fake_install(tmp_path / "install", binary_text=f"#!/bin/sh\ntouch '{marker}'\necho '{VERSION_LINE}'\n")
    with pytest.raises(ClaudeRpcRefusal) as fake:
        engine_binary(root)
    assert "binary-sha256" in fake.value.message
    assert not marker.exists()
    assert check_pin(root) == fake.value


def test_a_stand_in_install_lists_every_file_that_differs_and_the_binary_by_its_sha256(tmp_path: Path) -> None:
    root = fake_install(tmp_path / "install")
    kinds = {(m.kind, m.path) for m in verify_claude(root)}
    files = set(installed_files())
    binary = f"node_modules/{NATIVE_PACKAGE}/claude"
    assert kinds == {("package-file-changed", rel) for rel in files - {binary}} | {("binary-sha256", binary)}


def test_missing_extra_and_symlinked_package_files_are_mismatches(tmp_path: Path) -> None:
    root = fake_install(tmp_path / "install")
    base = root / "node_modules" / CLAUDE_PACKAGE
    (base / "README.md").unlink()
    (base / "extra.js").write_text("x")
    (base / "install.cjs").unlink()
    (base / "install.cjs").symlink_to(base / "package.json")
    found = {(m.kind, m.path, m.actual) for m in verify_claude(root)}
    assert ("package-file-missing", f"node_modules/{CLAUDE_PACKAGE}/README.md", None) in found
    assert ("package-file-extra", f"node_modules/{CLAUDE_PACKAGE}/extra.js", "present") in found
    assert ("package-file-changed", f"node_modules/{CLAUDE_PACKAGE}/install.cjs", "not a regular file") in found


def test_lockfile_and_npm_record_changes_are_mismatches(tmp_path: Path) -> None:
    root = fake_install(tmp_path / "install")
    (root / "package-lock.json").write_text("{}")
    record = root / "node_modules" / ".package-lock.json"
    doc = json.loads(record.read_text())
    doc["packages"][f"node_modules/{NATIVE_PACKAGE}"]["integrity"] = "sha512-other"
    doc["packages"]["node_modules/left-pad"] = {"version": "1.0.0"}
    del doc["packages"][f"node_modules/{CLAUDE_PACKAGE}"]
    record.write_text(json.dumps(doc))
    kinds = {(m.kind, m.path) for m in verify_claude(root)}
    assert ("lockfile-differs", "package-lock.json") in kinds
    assert ("installed-integrity", f"node_modules/{NATIVE_PACKAGE}") in kinds
    assert ("installed-version", "node_modules/left-pad") in kinds
    assert ("not-installed", f"node_modules/{CLAUDE_PACKAGE}") in kinds
    record.unlink()
    assert ("not-installed", "node_modules/.package-lock.json") in {(m.kind, m.path) for m in verify_claude(root)}


def test_an_empty_directory_and_a_missing_one_report_not_installed(tmp_path: Path) -> None:
    kinds = {m.kind for m in verify_claude(tmp_path)}
    assert {"manifest-differs", "lockfile-differs", "not-installed", "package-file-missing", "binary-missing"} == kinds
    assert [m.kind for m in pin_mismatches(tmp_path / "absent")] == ["not-installed"]


def test_the_refusal_table_is_the_readmes_and_every_code_is_a_refusal_of_the_family() -> None:
    assert dict(CODES) == {"engine-pin-mismatch": False, "unsealed-engine": False, "permission-unknown": False,
                           "permission-answered": False, "permission-cancelled": False,
                           "permission-resolved": False}
    readme = (REPO / "packages" / "claude-rpc" / "README.md").read_text()
    section = readme.split("## Refusals", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \| (yes|no) \|", section, re.MULTILINE)
    assert {code: flag == "yes" for code, flag in rows} == dict(CODES)
    with pytest.raises(ValueError):
        ClaudeRpcRefusal("engine-crashed", "not this package's code")


def test_the_pinned_constants_agree_with_the_pin_data() -> None:
    assert installed_files()[f"node_modules/{NATIVE_PACKAGE}/claude"] == BINARY_SHA256
    assert VERSION_LINE == "2.1.283 (Claude Code)"
    lock = json.loads(pin_data()["package-lock.json"])["packages"]
    assert lock[f"node_modules/{CLAUDE_PACKAGE}"]["integrity"] == CLAUDE_INTEGRITY
    assert lock[f"node_modules/{NATIVE_PACKAGE}"]["integrity"] == NATIVE_INTEGRITY
    assert json.loads(pin_data()["package.json"])["dependencies"] == {CLAUDE_PACKAGE: "2.1.283",
                                                                      NATIVE_PACKAGE: "2.1.283"}
