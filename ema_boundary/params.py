"""Parameter counts, one definition: total and non-embedding (Kaplan et al. 2020's N).

Embedding parameters are those of the token and position embeddings and of an untied output head
(the vocabulary matrices); tied weights count once. "Non-embedding" is what scales with depth and
width, and what a fair comparison of two architectures matches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

__all__ = ["ParameterCounts", "parameter_counts"]


@dataclass(frozen=True)
class ParameterCounts:
    total: int
    embedding: int

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "non_embedding": self.non_embedding}


def parameter_counts(model: torch.nn.Module) -> ParameterCounts:
    """Total and embedding parameters of ``model`` (works on the ``meta`` device: no weights needed)."""
    params = {id(p): p for p in model.parameters()}  # model.parameters() already yields a tied tensor once
    embedding: dict[int, torch.nn.Parameter] = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding):
            embedding[id(module.weight)] = module.weight
    get_output = getattr(model, "get_output_embeddings", None)
    head = get_output() if callable(get_output) else None
    if head is not None and getattr(head, "weight", None) is not None:
        embedding[id(head.weight)] = head.weight
    total = sum(p.numel() for p in params.values())
    return ParameterCounts(total=total, embedding=sum(p.numel() for k, p in embedding.items() if k in params))
