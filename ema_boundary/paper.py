"""The numbers the paper reports (arXiv 2604.08556), the one source for every comparison with it.

They are only ever shown beside ours; nothing is tuned toward them.
"""

from __future__ import annotations

__all__ = ["PAPER", "TITLE", "ARXIV"]

TITLE = "EMA Is Not All You Need: Mapping the Boundary Between Structure and Content in Recurrent Context"
ARXIV = "2604.08556"

PAPER: dict[str, float | str] = {
    # Structure (SPCN trace probe vs a supervised BiGRU on the role grammar).
    "ratio_within_a": 0.96,  # probe accuracy / BiGRU accuracy, grammar A held out
    "transfer_b_accuracy": 0.618,  # probe accuracy on grammar B
    "deep_accuracy": 0.84,  # probe accuracy on deeper embedding than training
    # Content (SPEN-130M vs GPT-2 small on C4).
    "perplexity_spen_c4": 260.0,
    "perplexity_gpt2_c4": 33.0,
    "perplexity_ratio": 260.0 / 33.0,
    "predictor_ablation": "identical loss across linear, linear-attention and softmax-attention predictors",
}
