"""B1 part 1 and L7 on the real install: the pin holds, the binary is the pinned one, and a copy of it with
one byte changed (or a symlink to it) refuses `engine-pin-mismatch` before any launch. Also B1 part 2's
first half: every file of the two npm packages has the sha256 `pin/sources.json` records."""

from __future__ import annotations

import shutil
from pathlib import Path

from mosaic.claude_rpc import ClaudeInstall, check_binary, check_pin, engine_binary
from mosaic.claude_rpc.install import BINARY_SHA256, BINARY_SIZE, binary_version, installed_files, sha256_file


def test_L7_the_installed_binary_is_the_pinned_one(claude: ClaudeInstall) -> None:
    assert check_pin(claude.root) is None
    assert engine_binary(claude.root) == claude.binary
    assert check_binary(claude.binary) is None
    assert claude.binary.stat().st_size == BINARY_SIZE and sha256_file(claude.binary) == BINARY_SHA256
    assert binary_version(claude.binary) == "2.1.283 (Claude Code)"


def test_L7_a_copy_with_one_byte_changed_or_a_symlink_refuses_engine_pin_mismatch(claude: ClaudeInstall,
                                                                                  tmp_path: Path) -> None:
    copy = tmp_path / "claude"
    shutil.copyfile(claude.binary, copy)
    copy.chmod(0o755)
    with open(copy, "r+b") as f:
        f.seek(BINARY_SIZE // 2)
        byte = f.read(1)
        f.seek(BINARY_SIZE // 2)
        f.write(bytes([byte[0] ^ 1]))
    refusal = check_binary(copy)
    assert refusal is not None and refusal.code == "engine-pin-mismatch" and "binary-sha256" in refusal.message
    link = tmp_path / "link"
    link.symlink_to(claude.binary)
    refusal = check_binary(link)
    assert refusal is not None and "binary-missing" in refusal.message


def test_the_installed_package_files_have_the_sha256_sources_json_records(claude: ClaudeInstall) -> None:
    recorded = installed_files()
    found = {p.relative_to(claude.root).as_posix() for top in (claude.package_dir, claude.native_dir)
             for p in top.rglob("*") if p.is_file()}
    assert found == set(recorded)
    for rel, digest in recorded.items():
        assert sha256_file(claude.root / rel) == digest, rel
    stub = (claude.package_dir / "bin" / "claude.exe").read_bytes()
    assert len(stub) < 4096  # npm ci --ignore-scripts: the postinstall never put the binary over the stub
