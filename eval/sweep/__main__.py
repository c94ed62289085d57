from eval.sweep.cli import main

raise SystemExit(main())
