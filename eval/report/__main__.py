import sys

from ema_boundary.cli import main  # `python -m eval.report`: the ema-boundary command, as documented commands run it

sys.exit(main())
