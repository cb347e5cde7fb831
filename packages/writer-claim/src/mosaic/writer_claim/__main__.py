"""``python -m mosaic.writer_claim`` (also the ``mosaic-claims`` console script): see ``cli``."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
