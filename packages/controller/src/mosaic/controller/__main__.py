"""``python -m mosaic.controller`` (also the ``mosaic-controller`` console script): see ``_cli``."""

from __future__ import annotations

from ._cli import main

raise SystemExit(main())
