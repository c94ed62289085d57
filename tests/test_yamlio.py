"""ema_boundary.yamlio: the one YAML reader: data with the line of every key, a key written twice refused with both
lines, every failure one line naming the file and line."""

from __future__ import annotations

import pytest

from ema_boundary.usage import UsageError
from ema_boundary.yamlio import DuplicateKeyError, YAMLFileError, read_yaml_file, read_yaml_text


def test_data_and_the_line_of_every_key(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("lr: 3.0e-3\narms:\n  spen:\n    lr: 1\n  gpt2: {lr: 2}\nseeds:\n  - name: a\n    x: 1\n")
    data, lines = read_yaml_file(path)
    assert data == {"lr": 3e-3, "arms": {"spen": {"lr": 1}, "gpt2": {"lr": 2}}, "seeds": [{"name": "a", "x": 1}]}
    assert lines == {("lr",): 1, ("arms",): 2, ("arms", "spen"): 3, ("arms", "spen", "lr"): 4, ("arms", "gpt2"): 5,
                     ("arms", "gpt2", "lr"): 5, ("seeds",): 6, ("seeds", "0"): 7, ("seeds", "0", "name"): 7,
                     ("seeds", "0", "x"): 8}
    assert read_yaml_text(path.read_text(), str(path)) == (data, lines)


@pytest.mark.parametrize("text, line, words", [
    ("lr: 1\nmax_steps: 2\nlr: 3e+3\n", 3, "lr is written twice (lines 1 and 3); keep one"),
    ("arms:\n  a:\n    lr: 1\n    lr: 2\n", 4, "arms.a.lr is written twice (lines 3 and 4); keep one"),
    ("arms:\n  a: 1\n  'a': 2\n", 3, "arms.a is written twice (lines 2 and 3)"),  # quoted or not: one key
    ("x: [1\n", 2, "invalid YAML"),
])
def test_a_key_written_twice_or_bad_yaml_is_one_line_with_the_line(tmp_path, text, line, words):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(YAMLFileError) as e:
        read_yaml_file(path)
    assert str(e.value).startswith(f"{path}:{line}: ") and words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(YAMLFileError) as e:
        read_yaml_text(text, "p.yaml")
    assert str(e.value).startswith(f"p.yaml:{line}: ") and words in str(e.value)


def test_the_duplicate_carries_both_lines():
    with pytest.raises(DuplicateKeyError) as e:
        read_yaml_text("a:\n  - b: 1\n    b: 2\n", "p.yaml")
    assert (e.value.path, e.value.first, e.value.line) == (("a", "0", "b"), 2, 3)
    assert str(e.value) == "p.yaml:3: a.b is written twice (lines 2 and 3); keep one"


def test_missing_binary_and_empty_files(tmp_path):
    with pytest.raises(YAMLFileError, match="^--plan .*none.yaml: no such file$"):
        read_yaml_file(tmp_path / "none.yaml", "--plan")
    (tmp_path / "b.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(YAMLFileError, match="not a UTF-8 text file"):
        read_yaml_file(tmp_path / "b.yaml")
    (tmp_path / "e.yaml").write_text("")
    assert read_yaml_file(tmp_path / "e.yaml") == (None, {})
    # merge keys may be overridden
    (tmp_path / "m.yaml").write_text("base: &b {lr: 1, x: 2}\nrun:\n  <<: *b\n  lr: 3\n")
    assert read_yaml_file(tmp_path / "m.yaml")[0]["run"] == {"lr": 3, "x": 2}


def test_every_reader_of_yaml_reads_through_it(tmp_path):
    # One reader (issue 50): train.py's settings, sweep plans and report plans word a duplicate alike.
    import train_config
    from eval.report.plan import Plan
    from eval.sweep.plan import load_plan

    path = tmp_path / "p.yaml"
    path.write_text("workers: 2\nworkers: 3\n")
    for read in (train_config.read_yaml, load_plan, Plan.load):
        with pytest.raises(UsageError, match=r"p.yaml:2: workers is written twice \(lines 1 and 2\); keep one$"):
            read(path)


def test_no_other_module_parses_yaml():
    # yaml.safe_load and friends forget lines and keep a duplicated key's later value: only this module reads YAML.
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    loaders = {"safe_load", "load", "full_load", "unsafe_load", "safe_load_all", "load_all", "SafeLoader", "Loader"}
    found = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in ("tests", "docs", ".venv", "build") or rel == Path("ema_boundary/yamlio.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in loaders and getattr(node.value, "id", "") == "yaml":
                found.append(f"{rel}:{node.lineno}")
    assert not found, found
