"""``python -m mosaic.mediated_terminal --socket PATH`` (also the ``mosaic-terminal`` console script)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
