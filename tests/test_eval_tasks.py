"""The task YAMLs in eval/tasks and the data files eval.make_data writes for them."""

from __future__ import annotations

import json

import yaml

from eval.make_data import GRAMMAR_TASK_SPLITS, ROLE_DESCRIPTIONS, grammar_items, main
from tests.eval_testkit import REPO

TASKS = REPO / "eval" / "tasks"


def test_every_task_is_indexed_and_has_no_python_hooks():
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(TASKS), include_defaults=False)
    expected = {"c4_val", "c4_val_local", "pydoc_val", "grammar_roles", "grammar_roles_within_a",
                "grammar_roles_transfer_b", "grammar_roles_deep", "grammar_roles_novel_words",
                "grammar_roles_counterfactual"}
    assert expected <= set(manager.all_tasks)
    for path in TASKS.rglob("*.yaml"):
        assert "!function" not in path.read_text(), path  # YAML only: no Python in the tasks


def test_c4_local_is_the_hub_task_on_local_files():
    hub = yaml.safe_load((TASKS / "perplexity" / "c4_val.yaml").read_text())
    local = yaml.safe_load((TASKS / "perplexity" / "c4_val_local.yaml").read_text())
    assert local["include"] == hub["include"] and local["dataset_path"] == "json"
    assert local["dataset_kwargs"]["data_files"]["validation"].endswith(
        hub["dataset_kwargs"]["data_files"]["validation"])


def test_grammar_choices_match_role_names_and_items_are_valid():
    from grammar_probe.dataset import build_dataset
    from grammar_probe.grammar import ROLE_NAMES

    template = yaml.safe_load((TASKS / "grammar_roles" / "_grammar_roles_template.yaml").read_text())
    assert list(ROLE_DESCRIPTIONS) == list(ROLE_NAMES)
    assert template["doc_to_choice"] == list(ROLE_DESCRIPTIONS.values())
    ds = build_dataset(train_size=20, validation_size=5, test_size=10)
    items = grammar_items(ds["test_deep"], "test_deep")
    assert items == grammar_items(ds["test_deep"], "test_deep")  # deterministic
    for item, row in zip(items, ds["test_deep"], strict=True):
        words = item["sentence"].split(" ")
        assert words == row["tokens"] and words[item["position"] - 1] == item["word"]
        assert item["label"] == row["roles"][item["position"] - 1] and item["role"] != "END"


def test_make_data_writes_files_the_tasks_read(tmp_path, capsys):
    from grammar_probe.dataset import build_dataset, write_dataset

    corpus = write_dataset(build_dataset(train_size=20, validation_size=5, test_size=10), tmp_path / "corpus")
    assert main(["all", "--dataset", str(corpus), "--out", str(tmp_path / "data")]) == 0
    pydoc = [json.loads(ln) for ln in (tmp_path / "data" / "pydoc_validation.jsonl").read_text().splitlines()]
    assert len(pydoc) == 8 and all(d["text"] for d in pydoc)  # 79 help topics, every 10th held out
    for split in GRAMMAR_TASK_SPLITS:
        assert len((tmp_path / "data" / "grammar" / f"{split}.jsonl").read_text().splitlines()) in (10, 20)
    # The YAMLs read exactly these relative paths.
    for path in (TASKS / "grammar_roles").glob("grammar_roles_*.yaml"):
        for f in yaml.safe_load(path.read_text())["dataset_kwargs"]["data_files"].values():
            assert f.startswith("outputs/eval_data/grammar/") and f.split("/")[-1][:-6] in GRAMMAR_TASK_SPLITS
    capsys.readouterr()
    assert main(["grammar", "--dataset", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--dataset" in err[0] and not (tmp_path / "x").exists()
