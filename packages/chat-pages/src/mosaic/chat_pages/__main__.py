"""python -m mosaic.chat_pages: the mosaic-read command line (see cli.py)."""

import sys

from .cli import main

sys.exit(main())
