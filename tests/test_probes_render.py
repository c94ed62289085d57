"""eval.probes.render: the markdown of the probes, each model's verdict and kind, the figures."""

from pathlib import Path

from eval.probes.render import (
    reader_kind,
    recall_verdict,
    render_content_probes_figures,
    render_content_probes_markdown,
)
from eval.recall import RecallRecipe, RecallTask, map_entry
from eval.recall_arms import escape_comparison
from modeling_spen import SPENConfig

PNG = b"\x89PNG\r\n\x1a\n"


def _spen(predictor: str, scope: str, trace: str) -> dict:
    return {"source": "config", "model_type": "spen", "parameters": 1,
            "spen": {"predictor": predictor, "predictor_scope": scope, "trace": trace}}


def _results(control_at_16: float = 1.0) -> dict:
    def recall(acc: list[float], steps: int = 2000) -> dict:
        return {"pairs": [2, 4, 8, 16], "accuracy": dict(zip(["2", "4", "8", "16"], acc, strict=True)),
                "steps": steps, "max_steps": 2000, "best_lr": 1e-3, "chance": 1 / 64, "sweep": {}, "seconds": 9.0,
                "parameters": 100_000}

    return {
        "models": {"gpt2": {"source": "config", "model_type": "gpt2", "parameters": 1},
                   "spen-linear": _spen("linear", "sequence", "ema"),
                   "spen-softmax-seq": _spen("softmax_attention", "sequence", "ema"),
                   "ckpt": {**_spen("linear", "state", "selective"), "source": "folder"}},
        "identity_settings": {"max_lag": 64, "seq_len": 192, "num_sequences": 48, "num_classes": 32},
        "identity_at_lag": {"ckpt": {"lags": list(range(1, 65)), "layers": {},
                                     "best": [0.9 - 0.01 * k for k in range(64)], "chance": [0.05] * 64}},
        "recall": {"spen-linear": recall([0.65, 0.3, 0.12, 0.07]), "gpt2": recall([1.0, 1.0, 1.0, control_at_16], 980),
                   "spen-softmax-seq": recall([0.99, 0.99, 0.98, 0.97], 1500), "ckpt": recall([0.99, 0.5, 0.1, 0.05])},
        "recall_settings": {"task": {"vocab_size": 128, "pairs": [2, 4, 8, 16]},
                            "recipe": {**RecallRecipe().__dict__, "lrs": [1e-3, 3e-3, 1e-2]}, "seed": 13,
                            "chance": 1 / 64},
        "positive_control": "gpt2",
        "seed": 13,
    }


def test_markdown_of_a_map_whose_control_passes() -> None:
    md = render_content_probes_markdown(_results())
    assert md.startswith("### Token identity at lag")
    assert "| model | k=1 | k=2 | k=4 | k=8 | k=16 | k=32 | k=64 | chance |" in md
    assert "| `ckpt` | 90.0% | 89.0% | 87.0% | 83.0% | 75.0% | 59.0% | 27.0% | 5.0% |" in md
    assert "### Associative recall (MQAR): the map" in md
    rows = [line for line in md.splitlines() if line.startswith("| `")][1:]
    assert rows[0].startswith("| `gpt2` | attention over tokens (positive control) |")  # the control first
    assert "| 100.0% | 100.0% | 100.0% | 100.0% | 980 (stopped early) | 0.001 |" in rows[0]
    assert ("| `spen-linear` | state scope, fixed-rate traces | — | — | 100,000 | 65.0% | 30.0% | 12.0% | 7.0% | "
            "2,000 (max)" in md)  # a map from before the two axes: its cells say so
    assert "| chance (a uniform guess among the values) | | | | | 1.6% | 1.6% | 1.6% | 1.6% |" in md
    assert "| copying a context value, keys ignored | | | | | 50.0% | 25.0% | 12.5% | 6.2% |" in md
    assert "**Positive control:** `gpt2` reaches 100.0% at 16 pairs" in md
    assert "too short" not in md
    assert "u_t = (h_t − (1 − a) h_{t−1}) / a" in md and "data-processing argument" in md
    assert "- state scope, fixed-rate traces: `spen-linear` partly (best 65.0% at 2 pairs, copying 50.0%)." in md
    assert "- sequence scope, fixed-rate traces: `spen-softmax-seq` recovers content (≥ 95% at 16 pairs)." in md
    assert "- input-dependent (selective) traces: `ckpt` recovers up to 2 pairs." in md
    assert "rests on one seed (seed 13)" in md and "verdict (one seed)" in md
    # no selective/fixed pair in this map: the escape section says so and where the full map lives
    assert "Not measured in this run" in md and "`hub_configs/sweeps/recall-map.yaml`" in md


def test_markdown_says_the_run_is_too_short_when_the_control_fails() -> None:
    md = render_content_probes_markdown(_results(control_at_16=0.40))
    assert "**The positive control `gpt2` did not reach 95% at 16 pairs (40.0%" in md
    assert "too short to say anything" in md and "not backed by a positive control that passed" in md
    no_control = _results()
    del no_control["recall"]["gpt2"], no_control["models"]["gpt2"]
    no_control["positive_control"] = None
    assert "**No positive control in this run**" in render_content_probes_markdown(no_control)


def test_markdown_of_a_quick_map_is_a_smoke_test() -> None:
    results = _results()
    for r in results["recall"].values():
        r["accuracy"].pop("16")
    md = render_content_probes_markdown(results)
    assert "`gpt2` reaches 100.0% at 8 pairs" in md and "a smoke test" in md and "16 pairs" in md
    assert "not backed by a positive control that passed" in md  # 8 pairs is not the bar


def test_verdicts_and_kinds() -> None:
    def r(*acc: float) -> dict:
        return {"accuracy": {str(n): a for n, a in zip((2, 4, 8, 16), acc, strict=True)}}

    assert recall_verdict(r(1, 1, 0.99, 0.95)).startswith("recovers content")
    assert recall_verdict(r(1, 0.96, 0.5, 0.1)) == "recovers up to 4 pairs"
    assert recall_verdict(r(0.55, 0.3, 0.25, 0.07)).startswith("partly (best 25.0% at 8 pairs")
    assert recall_verdict(r(0.5, 0.25, 0.13, 0.06)) == "no lookup beyond copying"
    assert reader_kind({"model_type": "gpt2"}) == "control" and reader_kind({"model_type": "mamba"}) == "other"
    assert reader_kind(_spen("linear", "sequence", "ema")) == "state"  # a linear reader sees the state, whatever scope
    assert reader_kind(_spen("softmax_attention", "state", "learned")) == "state"
    assert reader_kind(_spen("linear_attention", "sequence", "ema")) == "sequence"
    assert reader_kind(_spen("none", "state", "selective")) == "selective"
    assert reader_kind(_spen("linear", "sequence", "selective_ssm")) == "selective"


def _two_axis_results() -> dict:
    """A made-up map over five seeds with the two axes: the control, a fixed bank and a selective state of 16."""
    task = RecallTask(pairs=(4, 16))
    recipe = RecallRecipe(eval_examples=64)
    width = dict(hidden_size=16, num_attention_heads=2)
    configs = {"gpt2": (None, 1.0), "linear-ema16": (SPENConfig(**width, trace_num_rates=16), 0.07),
               "linear-selective_ssm": (SPENConfig(**width, trace="selective_ssm"), 0.9)}
    from transformers import GPT2Config

    results = _results()
    results["recall"], results["models"] = {}, {"gpt2": results["models"]["gpt2"]}
    results["identity_at_lag"] = {}
    for name, (config, acc) in configs.items():
        config = config or GPT2Config(n_embd=16, n_head=2)
        spread = 0.01 if name == "linear-selective_ssm" else 0.0
        runs = {s: {"accuracy": {"4": 1.0, "16": acc + spread * s}, "best_lr": 1e-3, "steps": 100, "seconds": 1.0,
                    "parameters": 10, "non_embedding_parameters": 5, "sweep": {}} for s in range(5)}
        results["recall"][name] = map_entry(config, task, recipe, runs)
        if name != "gpt2":
            results["models"][name] = _spen("linear", "sequence", config.trace)
    results["recall_settings"] = {**results["recall_settings"], "task": {"vocab_size": 128, "pairs": [4, 16]},
                                  "seeds": [0, 1, 2, 3, 4]}
    results["recall_escape"] = escape_comparison(results["recall"], "gpt2")
    return results


def test_markdown_of_a_map_on_two_axes_over_seeds() -> None:
    md = render_content_probes_markdown(_two_axis_results())
    assert "verdict (mean of 5 seeds)" in md and "at the task's length of 48 tokens" in md
    assert "(the same for every model); seeds 0, 1, 2, 3, 4." in md
    # GPT-2's keys and values grow with the sequence: 2 x 16 x 48 at the task's length.
    assert "| `gpt2` | attention over tokens (positive control) | attention over tokens | 1,536 (T = 48) |" in md
    assert "| `linear-ema16` | state scope, fixed-rate traces | fixed (EMA rates) | 256 |" in md
    assert ("| `linear-selective_ssm` | input-dependent (selective) traces | S6 decay and write, read one step late "
            "(SPEN's slots) | 304 |") in md  # 16 x 16 state + 3 read-out slots of 16
    assert "| 92.0% [90.8%, 93.2%] |" in md  # the mean of 0.90 .. 0.94 and its bootstrap interval over seeds
    # Differences 0.83 .. 0.87: mean 0.85, t interval 0.85 ± 2.776 x 0.0158 / sqrt(5).
    assert ("| 16 | `linear-selective_ssm` (304) | `linear-ema16` (256) | 5 | 92.0% | 7.0% | 6.2% | "
            "+0.850 [+0.830, +0.870] | selective higher") in md
    assert "The claim row reads N = 16: **selective higher**." in md


def test_figures(tmp_path: Path) -> None:
    paths = render_content_probes_figures(_two_axis_results(), tmp_path / "axes")
    assert set(paths) == {"recall", "recall_state"} and paths["recall_state"].read_bytes()[:8] == PNG
    paths = render_content_probes_figures(_results(), tmp_path / "figs")
    assert set(paths) == {"identity_at_lag", "recall"}  # a map without the two axes has no state figure
    assert all(p.read_bytes()[:8] == PNG for p in paths.values())
    recall_only = {**_results(), "identity_at_lag": {}}
    assert set(render_content_probes_figures(recall_only, tmp_path / "figs2")) == {"recall"}
