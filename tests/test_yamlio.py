"""ema_boundary.yamlio.load_yaml: YAML with the line of every key, a key given twice refused with both lines."""

from __future__ import annotations

import pytest

from ema_boundary.yamlio import YAMLFileError, load_yaml


def test_data_and_the_line_of_every_key(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("lr: 3.0e-3\narms:\n  spen:\n    lr: 1\n  gpt2: {lr: 2}\nseeds:\n  - name: a\n    x: 1\n")
    data, lines = load_yaml(path)
    assert data == {"lr": 3e-3, "arms": {"spen": {"lr": 1}, "gpt2": {"lr": 2}}, "seeds": [{"name": "a", "x": 1}]}
    assert lines == {"lr": 1, "arms": 2, "arms.spen": 3, "arms.spen.lr": 4, "arms.gpt2": 5, "arms.gpt2.lr": 5,
                     "seeds": 6, "seeds.0.name": 7, "seeds.0.x": 8}


@pytest.mark.parametrize("text, line, words", [
    ("lr: 1\nmax_steps: 2\nlr: 3e+3\n", 3, "duplicate key 'lr' (first at line 1, again at line 3)"),
    ("arms:\n  a:\n    lr: 1\n    lr: 2\n", 4, "duplicate key 'lr' (first at line 3, again at line 4)"),
    ("x: [1\n", 2, "invalid YAML"),
])
def test_a_key_given_twice_or_bad_yaml_is_one_line_with_the_line(tmp_path, text, line, words):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(YAMLFileError) as e:
        load_yaml(path)
    assert str(e.value).startswith(f"{path}:{line}: ") and words in str(e.value) and "\n" not in str(e.value)


def test_missing_binary_and_empty_files(tmp_path):
    with pytest.raises(YAMLFileError, match="no such file"):
        load_yaml(tmp_path / "none.yaml")
    (tmp_path / "b.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(YAMLFileError, match="not a UTF-8 text file"):
        load_yaml(tmp_path / "b.yaml")
    (tmp_path / "e.yaml").write_text("")
    assert load_yaml(tmp_path / "e.yaml") == (None, {})
    # merge keys may be overridden
    (tmp_path / "m.yaml").write_text("base: &b {lr: 1, x: 2}\nrun:\n  <<: *b\n  lr: 3\n")
    assert load_yaml(tmp_path / "m.yaml")[0]["run"] == {"lr": 3, "x": 2}


def test_the_plan_dialect_reads_through_the_same_reader(tmp_path):
    # One reader (issue 32): the plans word a duplicate in their own vocabulary, from the same detection; a quoted
    # key is the same key as a plain one, and the key paths agree with load_yaml's (plans also list the items).
    from eval.plans import PlanError, read_yaml

    text = "arms:\n  a: {lr: 1}\n  b:\n    - x: 1\n"
    path = tmp_path / "p.yaml"
    path.write_text(text)
    data, lines = read_yaml(text, "p.yaml")
    assert (data, load_yaml(path)[0]) == ({"arms": {"a": {"lr": 1}, "b": [{"x": 1}]}},) * 2
    assert {".".join(k): v for k, v in lines.items() if k != ("arms", "b", "0")} == load_yaml(path)[1]
    twice = "arms:\n  a: 1\n  'a': 2\n"
    with pytest.raises(PlanError, match=r"^p.yaml:3: arms.a is written twice \(lines 2 and 3\); keep one$"):
        read_yaml(twice, "p.yaml")
    path.write_text(twice)
    with pytest.raises(YAMLFileError, match=r"p.yaml:3: duplicate key 'a' \(first at line 2, again at line 3\)$"):
        load_yaml(path)
