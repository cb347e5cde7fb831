"""python -m mosaic.chat_pages: the mosaic-read command line (see _cli.py)."""

import sys

from ._cli import main

sys.exit(main())
