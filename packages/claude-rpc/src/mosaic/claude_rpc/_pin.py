"""The pin as a refusal (brief §8 B1 part 1 and L7): a binary whose sha256 or version differs refuses
``engine-pin-mismatch`` and is never launched.

Two checks, one code:

* :func:`check_binary` is the launch-time check of one executable, what a controller calls at construction
  and again at bind: a regular file (a symlink is refused, so the checked bytes are the bytes ``execve``
  runs) whose sha256 is the pinned one, and only then whose ``--version`` prints ``2.1.283 (Claude Code)``
  (run with :func:`mosaic.claude_rpc.install.quiet_env` in a scratch directory). A file whose bytes differ
  is never executed, not even for ``--version``.
* :func:`check_pin` checks a whole install (:func:`mosaic.claude_rpc.install.verify_claude`: the manifest
  and lockfile, what npm installed, every package file by sha256, then the binary as above).

:func:`engine_binary` returns the path to launch only after :func:`check_pin` passed: a launcher that gets
its path here cannot launch a binary that differs.
"""

from __future__ import annotations

import os
from pathlib import Path

from mosaic.claude_rpc._install import (
    BINARY_SHA256,
    VERSION_LINE,
    ClaudeInstall,
    PinMismatch,
    check_binary_file,
    verify_claude,
)
from mosaic.claude_rpc._refusal import ClaudeRpcRefusal

__all__ = ["check_binary", "check_pin", "engine_binary", "pin_mismatches"]


def _refusal(where: str, found: list[PinMismatch]) -> ClaudeRpcRefusal:
    shown = "; ".join(str(m) for m in found[:5])
    more = f" (+{len(found) - 5} more)" if len(found) > 5 else ""
    return ClaudeRpcRefusal("engine-pin-mismatch", f"{where}: {shown}{more}")


def check_binary(binary: str | os.PathLike[str], *, sha256: str = BINARY_SHA256,
                 version_line: str = VERSION_LINE) -> ClaudeRpcRefusal | None:
    """``None`` when ``binary`` is the pinned executable, else the ``engine-pin-mismatch`` refusal.

    ``sha256`` and ``version_line`` are the pin (the defaults); they are parameters so a test can hold a
    stand-in executable to the same rule. A differing sha256 refuses without running the file.
    """
    found = check_binary_file(binary, sha256=sha256, version_line=version_line)
    return _refusal(os.fspath(binary), found) if found else None


def pin_mismatches(claude_dir: str | os.PathLike[str]) -> list[PinMismatch]:
    """Every way the install in ``claude_dir`` differs from the pin (``[]`` = it matches)."""
    root = Path(claude_dir)
    if not root.is_dir():
        return [PinMismatch("not-installed", str(root), "an install directory", None)]
    return verify_claude(root)


def check_pin(claude_dir: str | os.PathLike[str]) -> ClaudeRpcRefusal | None:
    """``None`` when ``claude_dir`` holds exactly the pinned Claude Code, else the ``engine-pin-mismatch``
    refusal (its message lists the first differences)."""
    found = pin_mismatches(claude_dir)
    return _refusal(os.fspath(claude_dir), found) if found else None


def engine_binary(claude_dir: str | os.PathLike[str]) -> Path:
    """The absolute path of the binary to launch, after :func:`check_pin`; raises the refusal otherwise."""
    refusal = check_pin(claude_dir)
    if refusal is not None:
        raise refusal
    return ClaudeInstall(Path(claude_dir).resolve()).binary
