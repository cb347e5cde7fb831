"""The installer of the pinned Pi (README "Installer"): `install_pi(dest)` runs `npm ci` from the committed
pin, `ensure_pi(dest)` reuses a verified install, `verify_pi(root)` lists every `PinMismatch` (an empty list
when the install matches); `PiInstall` names an install's parts, `PiInstallError` is a failed install.
`pin_data()` and `bundle_manifest()` are the committed pin files; `PI_PACKAGE`, `PI_VERSION`,
`PI_INTEGRITY`, `NODE_PACKAGE` and `NODE_VERSION` the pinned versions.
"""

from __future__ import annotations

from . import _install
from ._install import *  # noqa: F403

__all__: list[str] = []
__all__ += _install.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
