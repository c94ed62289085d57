"""``ema-boundary sweep``: every multi-run experiment as a declared sweep on one runner.

- :mod:`.plan` - a sweep as data (base, arms, rate rule, seeds, budgets, what to score), checked at load;
- :mod:`.runner` - the folder layout, the rate rule applied, resume, results.json (:func:`summarize`);
- :mod:`.trainers` - what trains one run: ``train`` (train.py) and ``recall`` (MQAR);
- :mod:`.execute` - one run from its folder (the unit every launcher executes), and how the processes of a sweep
  stop together on a stop signal or when the sweep dies;
- :mod:`.launch` - local worker processes, or submitit (Slurm, or its local executor);
- :mod:`.analyses` - the analyses by name (each lives with its experiment; the runner hands it what it reads);
- :mod:`.render` - results.md;
- :mod:`.cli` - the command line.
"""
