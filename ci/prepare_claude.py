#!/usr/bin/env python3
"""Install (or reuse) the pinned Claude Code 2.1.283 in a directory, with progress lines.

    .venv/bin/python ci/prepare_claude.py .cache/claude

Reuse verifies the binary's sha256 and `--version`, every package file and npm's record. A first run fetches
about 231 MB from the npm registry (`npm ci --ignore-scripts` of the committed lockfile, about 5 s here). How
it reports, is interrupted and exits: `ci/engine_fetch.py`.
"""

from __future__ import annotations

import sys
from typing import Any

from engine_fetch import Engine, main

CLAUDE_MB = 231


def _calls() -> tuple[Any, Any, Any, Any]:
    from mosaic.claude_rpc import check_pin, ensure_claude  # noqa: PLC0415 - the venv's packages
    from mosaic.claude_rpc.install import ClaudeInstallError, verify_claude  # noqa: PLC0415

    return ensure_claude, check_pin, ClaudeInstallError, verify_claude


CLAUDE = Engine(script=__file__, pinned="Claude Code 2.1.283", fetched="the pinned Claude Code 2.1.283",
                about=f"about {CLAUDE_MB} MB, about 5 s", install="the Claude Code install",
                failed="the pinned Claude Code could not be installed", calls=_calls)

if __name__ == "__main__":
    sys.exit(main(CLAUDE, sys.argv[1:]))
