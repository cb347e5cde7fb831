"""The protocol sources by hash (brief §8 B1 part 2; docs/claude-2.1.283.md "Sources by hash").

`pin/sources.json` records, for the exact version: every file of the two npm packages (checked in every
install by verify_claude: tests/test_pin.py here, tests_smoke/test_pin_real.py on the real install), the
TypeScript Agent SDK 0.3.283 (`claudeCodeVersion` 2.1.283) and the Python Agent SDK 0.2.160 (whose
`_cli_version.py` says 2.1.283), each archive with its digest and every cited file's sha256. The fetched
archives are checked in tests_smoke/test_sources_real.py; here the checker is held to archives made here.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from mosaic.claude_rpc.install import BINARY_SHA256, CLAUDE_INTEGRITY, NATIVE_INTEGRITY
from mosaic.claude_rpc.sources import (
    SourcesError,
    archive_sources,
    fetch_sources,
    sources_manifest,
    verify_fetched_sources,
)

SHA256 = "0123456789abcdef" * 4


def test_every_source_is_version_bound_and_hashed_file_by_file() -> None:
    doc = sources_manifest()
    ids = [s["id"] for s in doc["sources"]]
    assert ids == ["claude-code", "claude-code-linux-x64", "claude-agent-sdk-ts", "claude-agent-sdk-py"]
    for source in doc["sources"]:
        assert source["version_bound"] is True, source["id"]
        assert source["files"] and all(len(h) == 64 and int(h, 16) >= 0 for h in source["files"].values())
    assert doc["floating"] == []  # none is used; docs/claude-2.1.283.md says why


def test_the_npm_package_files_include_the_ones_the_brief_names() -> None:
    by_id = {s["id"]: s for s in sources_manifest()["sources"]}
    wrapper, native = by_id["claude-code"], by_id["claude-code-linux-x64"]
    assert {"sdk-tools.d.ts", "README.md", "package.json", "install.cjs", "bin/claude.exe"} <= set(wrapper["files"])
    assert (wrapper["integrity"], native["integrity"]) == (CLAUDE_INTEGRITY, NATIVE_INTEGRITY)
    assert native["files"]["claude"] == BINARY_SHA256


def test_the_sdk_releases_are_the_ones_built_for_2_1_283() -> None:
    by_id = {s["id"]: s for s in sources_manifest()["sources"]}
    ts, py = by_id["claude-agent-sdk-ts"], by_id["claude-agent-sdk-py"]
    assert (ts["package"], ts["version"], ts["claudeCodeVersion"]) == ("@anthropic-ai/claude-agent-sdk", "0.3.283",
                                                                       "2.1.283")
    assert {"sdk.d.ts", "manifest.json", "sdk-tools.d.ts"} <= set(ts["files"])
    # The TS SDK ships the same sdk-tools.d.ts as the CLI package.
    assert ts["files"]["sdk-tools.d.ts"] == by_id["claude-code"]["files"]["sdk-tools.d.ts"]
    assert (py["package"], py["version"], py["cli_version"]) == ("claude-agent-sdk", "0.2.160", "2.1.283")
    assert {"src/claude_agent_sdk/_cli_version.py", "src/claude_agent_sdk/_internal/query.py",
            "src/claude_agent_sdk/_internal/sessions.py", "src/claude_agent_sdk/types.py"} <= set(py["files"])
    assert [s["id"] for s in archive_sources()] == ["claude-agent-sdk-ts", "claude-agent-sdk-py"]


def _archive(path: Path, root: str, members: dict[str, bytes]) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(root + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _source(kind: str, archive: str, digest: str, files: dict[str, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": "made-here", "kind": kind, "archive": archive, "root": "pkg/", "files": files}
    entry["sha256" if kind == "pypi-sdist" else "integrity"] = digest
    return entry


def test_the_checker_reads_each_cited_file_from_the_archive(tmp_path: Path) -> None:
    digest = _archive(tmp_path / "a.tar.gz", "pkg/", {"one.py": b"one", "two.py": b"two"})
    good = {"one.py": hashlib.sha256(b"one").hexdigest(), "two.py": hashlib.sha256(b"two").hexdigest()}
    assert verify_fetched_sources(tmp_path, [_source("pypi-sdist", "a.tar.gz", digest, good)]) == []
    bad = {**good, "two.py": SHA256, "three.py": SHA256}
    found = [(m.kind, m.path) for m in verify_fetched_sources(tmp_path, [_source("pypi-sdist", "a.tar.gz", digest, bad)])]
    assert found == [("member-missing", "three.py"), ("member-digest", "two.py")]


def test_an_archive_whose_digest_differs_is_not_opened_and_a_missing_one_is_named(tmp_path: Path) -> None:
    _archive(tmp_path / "a.tgz", "pkg/", {"x": b"x"})
    sri = "sha512-" + base64.b64encode(hashlib.sha512(b"other").digest()).decode()
    found = verify_fetched_sources(tmp_path, [_source("npm-tarball", "a.tgz", sri, {"x": SHA256}),
                                              _source("npm-tarball", "b.tgz", sri, {"x": SHA256})])
    assert [(m.kind, m.path, m.expected) for m in found] == [("archive-digest", "a.tgz", sri),
                                                              ("archive-missing", "b.tgz", None)]
    assert {m.kind for m in verify_fetched_sources(tmp_path / "nothing")} == {"archive-missing"}


def test_fetch_uses_npm_pack_and_pip_download_and_refuses_what_does_not_match(tmp_path: Path) -> None:
    log = tmp_path / "log"
    npm = tmp_path / "npm"
    npm.write_text(f"#!/bin/sh\necho npm \"$@\" >> '{log}'\n")
    pip = tmp_path / "pip"
    pip.write_text(f"#!/bin/sh\necho pip \"$@\" >> '{log}'\n")
    for tool in (npm, pip):
        tool.chmod(0o755)
    with pytest.raises(SourcesError) as got:
        fetch_sources(tmp_path / "sources", npm=str(npm), pip=[str(pip)])
    assert {m.kind for m in got.value.mismatches} == {"archive-missing"}
    calls = log.read_text().splitlines()
    assert calls[0].startswith("npm pack @anthropic-ai/claude-agent-sdk@0.3.283 --pack-destination ")
    assert calls[1].startswith("pip download --no-deps --no-binary :all: ") and calls[1].endswith(
        "claude-agent-sdk==0.2.160")


def test_a_failing_client_is_one_line(tmp_path: Path) -> None:
    npm = tmp_path / "npm"
    npm.write_text("#!/bin/sh\necho 'npm error code E404' >&2\nexit 1\n")
    npm.chmod(0o755)
    with pytest.raises(SourcesError, match="failed with exit 1: npm error code E404"):
        fetch_sources(tmp_path / "sources", npm=str(npm), pip=["false"])
