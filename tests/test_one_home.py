"""One home per concept (docs/architecture.md's "one place" table), read from the code with ``ast``, nothing run.

For each concept: the file that defines it and the names that make it up. A module-level definition of one of those
names (``def``, ``class``, an assignment; its private ``_name`` twin too) anywhere else in the project is a second
home, and fails here with the file and line. The verdict words have their own, wider check
(tests/test_verdict_words.py: any constant equal to a word), the YAML reader too (tests/test_yamlio.py: no other
module calls a YAML loader).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("ema_boundary", "eval", "grammar_probe", "training", "modeling_spen", "benchmarks", "train.py",
           "train_config.py")

# concept -> (its one file, the names defined there and nowhere else). stats.compare is left out: eval/compare.py's
# `compare` is the lm-eval command, another concept under the same everyday word.
CONCEPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "the gates (n-gram line, control, reference, interior rate, decidability) and interval -> verdict rules": (
        "eval/verdicts.py", ("Gate", "ngram_gate", "competence_gate", "control_gate", "reference_gate",
                             "interior_gate", "context_gate", "decidability_gate", "gated", "difference_verdict",
                             "escape_verdict")),
    "the verdict words": ("ema_boundary/verdicts.py", ("Verdict", "COMPARISON_VERDICTS", "SHORT", "higher")),
    "intervals and paired statistics": (
        "ema_boundary/stats.py", ("Comparison", "mean_ci", "paired_summary", "paired_differences", "tost_p",
                                  "detectable_difference", "compare_arms", "holm", "blocked_f_test",
                                  "accuracy_interval", "wilson", "slope_interval", "document_resamples",
                                  "resampled_means", "percentile_interval", "seed_interval", "Bootstrap",
                                  "bootstrap_interval", "bootstrap_difference", "holm_family", "target_verdict")),
    "the rate rule": ("eval/rates.py", ("RateRule", "RateSearch", "choose", "read_rate")),
    "reading a YAML file or plan": ("ema_boundary/yamlio.py", ("read_yaml_text", "read_yaml_file", "YAMLFileError",
                                                               "DuplicateKeyError")),
    "checkpoints: save, find, check, resume a state file": (
        "training/checkpoint.py", ("save_checkpoint", "find_checkpoint", "checkpoint_problem", "checkpoint_files",
                                   "save_state_file", "load_state_file")),
    "seeds derived from seeds": ("ema_boundary/seeding.py", ("recall_stream_seed", "recall_train_seed",
                                                             "recall_selection_seed", "recall_evaluation_seed",
                                                             "probe_seeds", "window_tagger_seed")),
    "atomic writes": ("ema_boundary/io.py", ("atomic_file", "atomic_files", "write_json", "write_text")),
    "a sweep run's paths": ("eval/sweep/paths.py", ("RunPaths", "run_id", "run_pattern", "RESULT_JSON", "RUN_JSON")),
}


def _files() -> Iterator[Path]:
    for entry in PROJECT:
        path = ROOT / entry
        yield from ([path] if path.is_file() else sorted(path.rglob("*.py")))


def _definitions(path: Path) -> Iterator[tuple[str, int]]:
    """(name, line) of each module-level definition (functions, classes, assigned names) and each method."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node.lineno
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        yield name.id, node.lineno


def second_homes(concepts: dict[str, tuple[str, tuple[str, ...]]], files: list[Path], root: Path = ROOT) -> list[str]:
    """``file:line name (concept, whose home is ...)`` for every definition of a concept's name outside its home."""
    owner = {name: (concept, home) for concept, (home, names) in concepts.items() for name in names}
    found = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        for name, line in _definitions(path):
            concept, home = owner.get(name.lstrip("_"), (None, None))
            if concept is not None and rel != home:
                found.append(f"{rel}:{line} {name} ({concept}: its home is {home})")
    return found


def test_each_concept_is_defined_in_its_one_file() -> None:
    found = second_homes(CONCEPTS, list(_files()))
    assert not found, "a concept defined a second time:\n" + "\n".join(found)


@pytest.mark.parametrize("concept", sorted(CONCEPTS))
def test_each_home_defines_its_names_and_the_architecture_page_names_it(concept: str) -> None:
    home, names = CONCEPTS[concept]
    defined = {name for name, _ in _definitions(ROOT / home)}
    # a name the table lists only to keep it from coming back elsewhere (competence_gate) may be absent from its home
    missing = [n for n in names if n not in defined and n != "competence_gate"]
    assert not missing, f"{home} does not define {missing}"
    assert f"`{home}`" in (ROOT / "docs/architecture.md").read_text(encoding="utf-8"), (
        f"docs/architecture.md's one-place table does not name {home} ({concept})")


def test_the_check_finds_a_second_gate(tmp_path: Path) -> None:
    """A gate computed again in another file (the way depth, ablation and the claims once did) is found."""
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval/verdicts.py").write_text("def ngram_gate(losses, line):\n    return max(losses) < line\n")
    (tmp_path / "eval/depth.py").write_text("def _ngram_gate(losses, line):\n    return min(losses) < line\n")
    files = [tmp_path / "eval/verdicts.py", tmp_path / "eval/depth.py"]
    found = second_homes({"gate": ("eval/verdicts.py", ("ngram_gate",))}, files, tmp_path)
    assert found == ["eval/depth.py:1 _ngram_gate (gate: its home is eval/verdicts.py)"]
