"""benchmarks/bench_ssm.py: a smoke run writes its tables and JSON; bad flags are refused in one line."""

import json

import pytest

from benchmarks import bench_ssm


@pytest.mark.slow
def test_quick_run_writes_tables_and_json(tmp_path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(bench_ssm, "QUICK_GRID", [(2, 4, 2), (2, 4, 1)])
    assert bench_ssm.main(["--quick", "--output_dir", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "ssm.json").read_text())
    assert report["command"].startswith("python -m benchmarks.bench_ssm --quick")
    assert [(r["B"], r["T"], r["N"], r["default"]) for r in report["operator"]] == [(2, 4, 2, "chunked"),
                                                                                    (2, 4, 1, "chunked")]
    row = report["step"][0]
    assert row["N"] == 3 and row["chunked ms/step"] > 0 and row["fused ms/step"] > 0
    assert "| arm | N |" in (tmp_path / "out" / "ssm.md").read_text()


def test_bad_flags_exit_2_with_one_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        bench_ssm.main(["--threads", "0", "--output_dir", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--threads" in err and len(err.splitlines()) == 1
