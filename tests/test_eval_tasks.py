"""The task YAMLs in eval/tasks and the data files eval.make_data writes for them."""

from __future__ import annotations

import ast
import json

import yaml

from eval.make_data import GRAMMAR_TASK_SPLITS, ROLE_DESCRIPTIONS, grammar_items, main
from tests.eval_testkit import REPO

TASKS = REPO / "eval" / "tasks"


def test_every_task_is_indexed_and_its_only_python_is_the_local_data_hook():
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(TASKS), include_defaults=False)
    expected = {"c4_val", "c4_val_local", "pydoc_val", "grammar_roles", "grammar_roles_within_a",
                "grammar_roles_transfer_b", "grammar_roles_deep", "grammar_roles_novel_words",
                "grammar_roles_counterfactual"}
    assert expected <= set(manager.all_tasks)
    # The tasks that read local files load them through local_data.load (a missing file: one line naming the
    # command that writes it); that hook imports nothing of the project, so the tasks run wherever lm_eval does.
    hooks = [p for p in TASKS.rglob("*.yaml") if "!function" in p.read_text()]
    assert {p.name for p in hooks} == {"pydoc_val.yaml", "c4_val_local.yaml", "_grammar_roles_template.yaml"}
    assert all("!function local_data.load" in p.read_text() and (p.parent / "local_data.py").is_file() for p in hooks)
    assert sorted(p.relative_to(TASKS).as_posix() for p in TASKS.rglob("*.py")) == [
        "grammar_roles/local_data.py", "perplexity/local_data.py"]
    tree = ast.parse((TASKS / "perplexity/local_data.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])}
    assert imported == {"__future__", "pathlib", "typing", "datasets"}


def _task_yaml(path):
    """A task YAML as data, its lm-eval hook (``!function``) read as the hook's name."""
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return yaml.load(path.read_text(), Loader=Loader)


def test_c4_local_is_the_hub_task_on_local_files():
    hub = _task_yaml(TASKS / "perplexity" / "c4_val.yaml")
    local = _task_yaml(TASKS / "perplexity" / "c4_val_local.yaml")
    assert local["include"] == hub["include"] and local["dataset_path"] == "json"
    assert local["dataset_kwargs"]["data_files"]["validation"].endswith(
        hub["dataset_kwargs"]["data_files"]["validation"])


def test_grammar_choices_match_role_names_and_items_are_valid():
    from grammar_probe.dataset import build_dataset
    from grammar_probe.grammar import ROLE_NAMES

    template = _task_yaml(TASKS / "grammar_roles" / "_grammar_roles_template.yaml")
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
