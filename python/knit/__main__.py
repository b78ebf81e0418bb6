"""python -m knit: the knit command line (knit.cli)."""
import sys

from .cli import main

sys.exit(main())
