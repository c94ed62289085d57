"""benchmarks/bench_recall_arms.py: a smoke run times every arm it names, transformers' own Mamba scan beside the
swapped one; bad flags are refused in one line."""

import json

import pytest

from benchmarks import bench_recall_arms


@pytest.mark.slow  # builds and steps six models: about a minute on two shared cores
def test_quick_run_times_each_arm_and_transformers_own_scan(tmp_path, capsys) -> None:
    assert bench_recall_arms.main(["--quick", "--output_dir", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "recall_arms.json").read_text())
    arms = [r["arm"] for r in report["rows"]]
    assert arms == [*bench_recall_arms.QUICK_ARMS, "hf-mamba (transformers' own scan)"]
    assert all(r["ms/step"] > 0 for r in report["rows"])
    rows = {r["arm"]: r for r in report["rows"]}
    assert rows["hf-mamba"]["state numbers"] == rows["hf-mamba (transformers' own scan)"]["state numbers"] == 64 * 20
    assert "| mixer_mamba | S6 in Mamba's block (conv 4, current read, gate) |" in capsys.readouterr().out


def test_bad_flags_exit_2_with_one_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        bench_recall_arms.main(["--threads", "0", "--output_dir", str(tmp_path)])
    assert e.value.code == 2 and "--threads" in capsys.readouterr().err
