"""``python -m eval.scale``: its command line lives with the runner (:func:`eval.sweep.cli.scale_main`), so the
experiment, eval.scale, never imports the runner; this script at the top joins the two."""

import sys

from eval.sweep.cli import scale_main as main

if __name__ == "__main__":
    sys.exit(main())
