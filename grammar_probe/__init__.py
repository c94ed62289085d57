"""Grammar probe: the structure experiment of "EMA Is Not All You Need" (SPCN vs BiGRU).

Public entry points::

    from grammar_probe.dataset import build_dataset, write_dataset, load_grammar_dataset
    from grammar_probe.experiment import run_experiment
"""
