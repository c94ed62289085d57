"""Evaluation of trained models, and the report.

- ``eval/tasks/``: lm-evaluation-harness task YAMLs (perplexity on C4 / the embedded corpus, grammar roles);
- :mod:`eval.make_data`: the local data files those tasks read;
- :mod:`eval.compare`: several models on the same lm-eval tasks, tabulated;
- :mod:`eval.ablation`: the predictor and trace ablations (SPEN variants x seeds through ``train.main``);
- :mod:`eval.probes`: token identity at lag and associative recall;
- :mod:`eval.recall`: the associative-recall task, recipe and map; :mod:`eval.ngram`: Kneser-Ney references;
- :mod:`eval.report`: ``ema-boundary report``, every experiment into one boundary report.
"""
