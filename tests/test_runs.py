"""eval/runs.py: what the experiments read of a train.py run."""

from __future__ import annotations

import json

from eval.runs import read_metrics, read_test


def test_read_test_is_the_last_records_test_score(tmp_path) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 2, "loss": 5.0, "tokens": 10}, {"step": 4, "loss": 4.0, "tokens": 20, "val_loss": 4.5},
            {"step": 4, "test_loss": 4.4, "test_ppl": 81.45, "test_tokens": 256, "test_documents": 3}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_test(path) == {"test_loss": 4.4, "test_ppl": 81.45, "test_tokens": 256, "test_documents": 3}
    assert read_metrics(path)["val_loss"] == [4.5] and read_metrics(path)["loss"] == [5.0, 4.0]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    assert read_test(path) is None  # a run without a test split
