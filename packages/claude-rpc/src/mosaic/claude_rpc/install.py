"""The installer of the pinned Claude Code (README "Installer"): `install_claude(dest)` runs `npm ci
--ignore-scripts` from the committed pin, `ensure_claude(dest)` reuses a verified install,
`verify_claude(root)` lists every `PinMismatch` (an empty list when the install matches); `ClaudeInstall`
names an install's parts, `ClaudeInstallError` is a failed install. `pin_data()`, `sources_manifest()` and
`installed_files()` are the committed pin files; the constants are the pinned versions and hashes.
`quiet_env(scratch)` / `make_quiet_dirs(scratch)` give the whole environment of a run of the binary;
`binary_version(path)` runs `--version` in it; `sha256_file` hashes a file.
"""

from __future__ import annotations

from . import _install
from ._install import *  # noqa: F403

__all__: list[str] = []
__all__ += _install.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
