"""``python -m eval.depth``: its command line lives with the runner (:func:`eval.sweep.alias.depth_main`), so the
experiment, eval.depth, never imports the runner; this script at the top joins the two."""

import sys

from eval.sweep.alias import depth_main as main

if __name__ == "__main__":
    sys.exit(main())
