"""``python -m mosaic.controller`` (also the ``mosaic-controller`` console script): see ``cli``."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
