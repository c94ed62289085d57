"""What one report run trains and probes: the only place that decides what --quick and --scale mean."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCALES = ("tiny", "130m")
CORPORA = ("embedded", "c4")  # or a path to a text file
# Grammar `train` sentences: enough for every seed of `grammar_probe run` (default / --quick) to get a
# disjoint training subset (docs/grammar_probe.md).
GRAMMAR_TRAIN, GRAMMAR_TRAIN_QUICK = 10_000, 3_000


@dataclass(frozen=True)
class Plan:
    """Typed settings of one ``ema-boundary report`` run, derived from its command line by :meth:`make`."""

    scale: str
    quick: bool
    corpus: str  # "embedded", "c4" or a text file
    seed: int  # of the grammar corpus, SPCN, the probes and the recall models
    spen_yaml: str  # train.py YAMLs of the two architectures, relative to the repository root
    gpt2_yaml: str
    max_steps: int  # optimizer steps of every language-model run
    seeds: int  # seeds per ablation variant and of the GPT-2 baseline
    grammar_train_size: int  # sentences in the grammar corpus' train split
    grammar_quick: bool  # `python -m grammar_probe run --quick`
    probes_quick: bool  # `python -m eval.content_probes --quick`
    recall_steps: int | None  # the recall models' training steps (None: the probe preset's)

    @staticmethod
    def make(scale: str = "tiny", quick: bool = False, corpus: str = "embedded", seed: int = 0,
             max_steps: int | None = None) -> Plan:
        """The plan for ``--scale``, ``--quick``, ``--corpus``, ``--seed`` and ``--max-steps``.

        ``--max-steps`` caps every training run, the recall models' included.
        """
        from eval.content_probes import ProbeSettings

        if scale not in SCALES:
            raise ValueError(f"--scale must be one of {SCALES}, got {scale!r}")
        probes_quick = quick and scale == "tiny"
        preset = ProbeSettings.quick() if probes_quick else ProbeSettings()
        recall_steps = None if max_steps is None else min(preset.recall_steps, max_steps)
        common = dict(scale=scale, quick=quick, corpus=corpus, seed=seed, recall_steps=recall_steps)
        if scale == "130m":
            # 18 runs (5 predictors, 3 traces, GPT-2; 2 seeds each) of 1000 steps x 524k tokens: the
            # full 5000-step recipe of train.yaml is for the headline pair alone (docs/training.md).
            return Plan(**common, spen_yaml="hub_configs/spen-130m/train.yaml",
                        gpt2_yaml="hub_configs/gpt2-small/train.yaml", max_steps=max_steps or 1000, seeds=2,
                        grammar_train_size=GRAMMAR_TRAIN, grammar_quick=False, probes_quick=False)
        if quick:
            return Plan(**common, spen_yaml="hub_configs/spen-tiny/train.yaml",
                        gpt2_yaml="hub_configs/gpt2-tiny/train.yaml", max_steps=max_steps or 60, seeds=2,
                        grammar_train_size=GRAMMAR_TRAIN_QUICK, grammar_quick=True, probes_quick=True)
        return Plan(**common, spen_yaml="hub_configs/spen-tiny/train.yaml",
                    gpt2_yaml="hub_configs/gpt2-tiny/train.yaml", max_steps=max_steps or 200, seeds=2,
                    grammar_train_size=GRAMMAR_TRAIN, grammar_quick=False, probes_quick=False)

    @property
    def data(self) -> list[str]:
        """train.py's ``--data`` for this corpus."""
        return [self.corpus] if self.corpus in CORPORA else [str(Path(self.corpus).resolve())]
