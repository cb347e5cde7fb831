"""The installer of the pinned Claude Code (README "Installer"): `install_claude(dest)` runs `npm ci
--ignore-scripts` from the committed pin, `ensure_claude(dest)` reuses a verified install,
`verify_claude(root)` lists every `PinMismatch` (an empty list when the install matches); `ClaudeInstall`
names an install's parts, `ClaudeInstallError` is a failed install. `pin_data()`, `sources_manifest()` and
`installed_files()` are the committed pin files; the constants are the pinned versions and hashes.
`quiet_env(scratch)` / `make_quiet_dirs(scratch)` give the whole environment of a run of the binary;
`binary_version(path)` runs `--version` in it; `sha256_file` hashes a file.
"""

from __future__ import annotations

from ._install import (
    BINARY_SHA256,
    BINARY_SIZE,
    CLAUDE_INTEGRITY,
    CLAUDE_PACKAGE,
    CLAUDE_VERSION,
    NATIVE_INTEGRITY,
    NATIVE_PACKAGE,
    NPM_CI_ARGS,
    VERSION_LINE,
    ClaudeInstall,
    ClaudeInstallError,
    PinMismatch,
    binary_version,
    ensure_claude,
    install_claude,
    installed_files,
    make_quiet_dirs,
    pin_data,
    quiet_env,
    sha256_file,
    sources_manifest,
    verify_claude,
)

__all__ = [
    "BINARY_SHA256",
    "BINARY_SIZE",
    "CLAUDE_INTEGRITY",
    "CLAUDE_PACKAGE",
    "CLAUDE_VERSION",
    "NATIVE_INTEGRITY",
    "NATIVE_PACKAGE",
    "NPM_CI_ARGS",
    "VERSION_LINE",
    "ClaudeInstall",
    "ClaudeInstallError",
    "PinMismatch",
    "binary_version",
    "ensure_claude",
    "install_claude",
    "installed_files",
    "make_quiet_dirs",
    "pin_data",
    "quiet_env",
    "sha256_file",
    "sources_manifest",
    "verify_claude",
]


def __dir__() -> list[str]:
    return sorted(__all__)
