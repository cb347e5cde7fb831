"""``python -m mosaic.pi_rpc.testing.record PI_DIR OUT_DIR [NAME...]``: regenerate the conformance goldens.

Runs every conformance scenario (or the named ones) against the real sealed binary installed in ``PI_DIR``,
with the scripted model server, and writes each normalised transcript to ``OUT_DIR/<name>.json``
(:func:`mosaic.pi_rpc.testing.conformance.record_goldens`). The package's goldens live in
``packages/pi-rpc/tests/data/conformance``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from mosaic.pi_rpc.testing.conformance import record_goldens

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for name in record_goldens(args[0], args[1], args[2:]):
        print(f"recorded {name}")
    return 0


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
