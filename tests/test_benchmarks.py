"""The benchmark runner produces well-formed output (no timing is asserted: CI machines vary).

Runs the whole pipeline in-process on the quick suite shrunk further to the smallest sizes,
so the test takes seconds; ``python -m benchmarks.run --quick`` is the full smoke run.
"""

import copy
import json
import math

import pytest

from benchmarks import run as bench_run

TINY = {"width": 32, "depth": 1, "heads": 2, "vocab": 64}


@pytest.fixture
def tiny_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    suite = copy.deepcopy(bench_run.SUITES["quick"])
    suite["traces"].update(sizes=[1e5], dtypes=["fp32", "bf16"], repeats=1, slow_cap=1e5)
    suite["chunks"].update(sizes=[1e5], chunks=[4, 16], repeats=1)
    suite["train"].update(seq_lens=[16, 32], tokens_per_step=32, repeats=1, size=TINY)
    suite["decode"].update(contexts=[8, 32], batches=[1, 2], steps=1, size=TINY)
    suite["spcn"].update(n_sentences=8, repeats=1, probe_epochs=2)
    # The headline models are what it measures; train.py's end-to-end rows are left to the command (tens of s).
    suite["throughput"].update(seeds=2, repeats=1, data_steps=2, end_to_end=False)
    monkeypatch.setitem(bench_run.SUITES, "quick", suite)


def _finite_numbers(obj: object) -> bool:
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_finite_numbers(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_finite_numbers(v) for v in obj)
    return True


@pytest.mark.slow
def test_quick_run_writes_well_formed_json(tiny_suite: None, tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    assert bench_run.main(["--quick", "--threads", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) >= {"command", "suite", "machine", "results"}
    assert report["suite"] == "quick"
    assert set(report["results"]) == set(bench_run.BENCHMARKS)
    assert _finite_numbers(report)

    traces = report["results"]["traces"]["rows"]
    methods = {(r["method"], r["dtype"], r["pass"]) for r in traces}
    for dtype in ("fp32", "bf16"):
        for pass_ in ("fwd", "fwd+bwd"):
            assert ("fast", dtype, pass_) in methods and ("naive fp64", dtype, pass_) in methods
    assert all(r["min_s"] > 0 and r["min_s"] <= r["median_s"] for r in traces)

    train = report["results"]["train"]["rows"]
    assert {(r["arch"], r["T"]) for r in train} == {(a, T) for a in ("spen", "gpt2") for T in (16, 32)}
    assert all(r["tokens_per_s"] > 0 and r["peak_mem_MiB"] >= 0 for r in train)

    decode = report["results"]["decode"]["rows"]
    spen_state = {r["state_MiB"] for r in decode if r["arch"] == "spen" and r["B"] == 1}
    assert len(spen_state) == 1  # constant-size state, whatever the context
    gpt2 = sorted((r["context"], r["state_MiB"]) for r in decode if r["arch"] == "gpt2" and r["B"] == 1)
    assert gpt2[0][1] < gpt2[-1][1]  # the KV cache grows with the context

    throughput = report["results"]["throughput"]
    assert throughput["roofline"]["flop_per_s"] > 0
    rows = {(r["arch"], r["what"]): r for r in throughput["rows"]}
    for arch in ("spen", "gpt2"):
        bare = rows[(arch, "bare step")]
        assert bare["vs_bare_step"] == 1 and 0 < bare["of_roofline"]
        for engine in ("sequential", "stacked"):
            ens = rows[(arch, f"ensemble step ({engine})")]
            assert ens["seeds"] == 2 and ens["tokens_per_s"] > 0
        assert rows[(arch, "data pipeline")]["s_per_step"] > 0
    assert {r["arch"] for r in throughput["profile"]} == {"spen", "gpt2"}
    assert throughput["report"]["tokens_per_s"] > 0  # read from the committed docs/report/report.json
    assert all(0 <= r["share"] <= 1 for r in throughput["profile"])

    spcn = report["results"]["spcn"]
    assert spcn.get("skipped") or spcn["rows"]
    # The tables are printed too.
    assert "Trace operator" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--only", "nope", "--out", "x.json"], "--only"),
        (["--threads", "0", "--out", "x.json"], "--threads"),
        (["--repeats", "many", "--out", "x.json"], "--repeats"),
        (["--quick"], "--output_dir"),
        (["--out", "/nonexistent-dir/x.json"], "--out"),
        (["--output_dir", "/nonexistent-dir/sub"], "--output_dir"),
        (["--output_dir", "d", "--out", "x.json"], "--output_dir"),
    ],
)
def test_bad_flags_exit_2_with_one_line(argv: list[str], flag: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_run.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err


def test_output_dir_holds_the_json_and_the_tables(tiny_suite: None, tmp_path, capsys) -> None:
    out = tmp_path / "bench"
    assert bench_run.main(["--quick", "--threads", "1", "--only", "chunks", "--output_dir", str(out)]) == 0
    report = json.loads((out / "results.json").read_text())
    assert set(report["results"]) == {"chunks"}
    tables = (out / "tables.md").read_text()
    assert report["command"] in tables and "|" in tables


def test_help_shows_the_defaults(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_run.main(["--help"])
    assert exc.value.code == 0
    assert "(default: cpu)" in capsys.readouterr().out
