"""python -m mosaic.pi_format [--project DIR] FILE.jsonl...: the command line of `mosaic.pi_format.cli`."""

import sys

from .cli import main

sys.exit(main())
