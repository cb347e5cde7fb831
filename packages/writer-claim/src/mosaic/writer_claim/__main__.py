"""``python -m mosaic.writer_claim`` (also the ``mosaic-claims`` console script): see ``_cli``."""

from __future__ import annotations

from ._cli import main

raise SystemExit(main())
