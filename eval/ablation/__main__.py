"""``python -m eval.ablation``: its command line lives with the runner (:func:`eval.sweep.alias.ablation_main`), so the
experiment, eval.ablation, never imports the runner; this script at the top joins the two."""

import sys

from eval.sweep.alias import ablation_main as main

if __name__ == "__main__":
    sys.exit(main())
