"""B1 part 2: the two Agent SDK releases built for 2.1.283, as `smoke prepare` fetched them with npm and
pip, match `pin/sources.json` archive by archive and file by file."""

from __future__ import annotations

import tarfile
from pathlib import Path

from mosaic.claude_rpc.sources import archive_sources, verify_fetched_sources


def test_the_fetched_sources_match_the_manifest(sources_dir: Path) -> None:
    assert verify_fetched_sources(sources_dir) == []


def test_the_python_sdk_names_cli_2_1_283_and_the_ts_sdk_manifest_names_the_pinned_binary(sources_dir: Path) -> None:
    by_id = {s["id"]: s for s in archive_sources()}
    py = by_id["claude-agent-sdk-py"]
    with tarfile.open(sources_dir / py["archive"]) as tar:
        handle = tar.extractfile(py["root"] + "src/claude_agent_sdk/_cli_version.py")
        assert handle is not None and b'__cli_version__ = "2.1.283"' in handle.read()
    ts = by_id["claude-agent-sdk-ts"]
    with tarfile.open(sources_dir / ts["archive"]) as tar:
        handle = tar.extractfile(ts["root"] + "manifest.json")
        assert handle is not None
        text = handle.read().decode()
    assert '"version": "2.1.283"' in text
    assert "1859583ce32920595c61ef868bee52e1b1594f7486db209935e01f1e5e804ae2" in text
