import sys

from eval.report.cli import main

sys.exit(main())
