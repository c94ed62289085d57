"""``python -m eval.report``: the ``ema-boundary`` command (:mod:`ema_boundary.cli`), as documented commands run it."""

import sys

from ema_boundary.cli import main

if __name__ == "__main__":
    sys.exit(main())
