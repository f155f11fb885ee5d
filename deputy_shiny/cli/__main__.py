"""``python -m deputy_shiny.cli``: the ``deputy`` command without its console script."""

from __future__ import annotations

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
