"""The claude-smoke suite's preparation step: install (or reuse) the pinned Claude Code, check the pin, and
fetch the protocol sources.

``python -m mosaic.claude_rpc.testing.smoke prepare CLAUDE_DIR SOURCES_DIR`` runs
:func:`mosaic.claude_rpc.ensure_claude` on ``CLAUDE_DIR`` (``npm ci`` of the committed lockfile when it does
not already verify), then :func:`mosaic.claude_rpc.check_pin`, then
:func:`mosaic.claude_rpc.sources.fetch_sources` on ``SOURCES_DIR`` (npm and pip fetch only what is
missing), and prints one line per step. It runs *outside* the network namespace; the tests run inside one
(``python -m mosaic.claude_rpc.testing.netns -- pytest ...``) and find both directories through
``MOSAIC_CLAUDE_DIR`` and ``MOSAIC_CLAUDE_SOURCES``. Exit 1 with one line when a step fails.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from mosaic.claude_rpc._install import ClaudeInstallError, ensure_claude
from mosaic.claude_rpc._pin import check_pin
from mosaic.claude_rpc._sources import SourcesError, fetch_sources

__all__ = ["main", "prepare"]


def prepare(claude_dir: str, sources_dir: str) -> tuple[Path, Path]:
    """Install or reuse the pinned Claude Code and fetch the sources; ``SystemExit`` with one line when
    either does not match the pin."""
    try:
        install = ensure_claude(claude_dir)
    except ClaudeInstallError as exc:
        raise SystemExit(f"claude-smoke: the pinned Claude Code could not be installed: {str(exc).splitlines()[0]}") \
            from None
    refusal = check_pin(install.root)
    if refusal is not None:
        raise SystemExit(f"claude-smoke: {refusal.code}: {refusal.message}")
    try:
        sources = fetch_sources(sources_dir)
    except SourcesError as exc:
        raise SystemExit(f"claude-smoke: the protocol sources: {exc}") from None
    return install.root, sources


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] != "prepare":
        print("usage: python -m mosaic.claude_rpc.testing.smoke prepare CLAUDE_DIR SOURCES_DIR", file=sys.stderr)
        return 2
    root, sources = prepare(args[1], args[2])
    print(f"pinned Claude Code 2.1.283 in {root}: verified against the pin")
    print(f"protocol sources in {sources}: verified against sources.json")
    return 0


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
