"""The pieces of training, one module each; ``train.py`` is the loop over them (as nanoGPT's train.py).

- :mod:`training.data`: the training stream (shuffled as the settings say), the test blocks, the tokenizer, and
  the checks of data against settings and model;
- :mod:`training.loss`: next-token cross-entropy (every model's loss and score), SPEN's prediction loss, the
  objective, validation;
- :mod:`training.optim`: AdamW (decay on matrices and embeddings only) and the warmup + cosine schedule;
- :mod:`training.accelerator`: Accelerate for one run (process group, devices, precision, accumulation,
  trackers, metrics.jsonl);
- :mod:`training.checkpoint`: checkpoints, their one home (saved whole, found, checked, passed over when damaged;
  also eval.recall's one-file state), and the run folder while a run writes it (its lock, settings, metrics,
  final/);
- :mod:`training.pretrained`: the weights a run starts from (``--model_name_or_path`` on a trained folder), checked;
- :mod:`training.card`: the model card;
- :mod:`training.console`: what train.py prints, at --log_level;
- :mod:`training.interrupt`: Ctrl-C, SIGTERM and SIGUSR1 as a request to checkpoint and stop;
- :mod:`training.hub`: --push_to_hub;
- :mod:`training.ensemble`: ``train.py --seeds``, K seeds trained as one ensemble from the same pieces.

The settings are ``train_config`` (below this package); the corpus is ``ema_boundary.corpus``. Nothing here
imports ``train``.
"""
