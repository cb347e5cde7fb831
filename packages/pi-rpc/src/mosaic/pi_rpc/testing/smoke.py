"""The smoke suite's preparation step: install (or reuse) the pinned engine and verify it.

``python -m mosaic.pi_rpc.testing.smoke prepare DIR`` runs :func:`mosaic.pi_rpc.ensure_pi` on ``DIR`` (``npm
ci`` of the committed lockfile when ``DIR`` does not already verify; needs only the npm registry), then the
pin check of :func:`mosaic.pi_rpc.check_pin`, and prints ``DIR``. It runs *outside* the network
namespace; the tests themselves run inside one (``python -m mosaic.pi_rpc.testing.netns -- pytest ...``)
and find the install through ``MOSAIC_PI_DIR``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from mosaic.pi_rpc._install import ensure_pi
from mosaic.pi_rpc._pin import check_pin

__all__ = ["main", "prepare"]


def prepare(directory: str) -> Path:
    """Install or reuse the pinned engine in ``directory``; raise if it does not match the pin."""
    install = ensure_pi(directory)
    refusal = check_pin(install.root)
    if refusal is not None:
        raise SystemExit(f"smoke: {refusal}")
    return install.root


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "prepare":
        print("usage: python -m mosaic.pi_rpc.testing.smoke prepare DIR", file=sys.stderr)
        return 2
    print(prepare(args[1]))
    return 0


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
