"""The layer rules of docs/architecture.md, read from the imports of every project file (``ast``, nothing run).

- ``modeling_spen`` imports nothing of the project (it is copied beside checkpoints for ``trust_remote_code``),
  and only relatively within itself;
- ``ema_boundary`` imports nothing of the project but itself, except its one entry point at the top,
  ``ema_boundary/cli.py`` (the ``ema-boundary`` command), which may import ``eval`` and which nothing of the project
  imports but ``eval/report/__main__.py`` (``python -m eval.report``, a script);
- ``eval`` reaches training only through ``train_config`` (settings), ``train.main`` (a run) and
  ``training.checkpoint`` (checkpoints' one home: a sweep checks a run's checkpoints, eval.recall saves its state);
- ``grammar_probe`` does not import ``eval`` (nor training);
- nothing imports a script's internals: of ``train`` and of a ``__main__`` module only ``main`` is used;
- inside ``eval`` the arrows run one way, report -> runner -> experiments: an experiment (any ``eval`` module outside
  ``eval/report/`` and ``eval/sweep/``, a ``__main__`` script aside) imports neither the runner nor the report;
- no import circle among the project's files (issue 50: a circle held together by an import inside a function is
  one too);
- an import inside a function says why on its own line, or under a comment line that heads its run of imports (an
  optional dependency, or the entry point's deferral that keeps ``--help`` fast); no file outside tests is over
  700 lines.

Imports inside functions count as much as those at the top. Tests and the research notes under docs/ are not
project layers (tests read internals on purpose).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What each layer may import of the project (its own name included where it may import itself absolutely).
LAYERS: dict[str, set[str]] = {
    "modeling_spen": set(),
    "ema_boundary": {"ema_boundary"},
    "grammar_probe": {"grammar_probe", "ema_boundary", "modeling_spen"},
    "train_config": {"ema_boundary"},
    # the pieces of training (data, loss, optimizer, checkpoints, card, the --seeds ensemble); never train itself
    "training": {"training", "train_config", "ema_boundary", "modeling_spen"},
    "train": {"train_config", "training", "ema_boundary", "modeling_spen"},
    # of training's pieces, eval uses checkpoints' one home only (a dotted entry: that module, not its package)
    "eval": {"eval", "train_config", "train", "training.checkpoint", "ema_boundary", "modeling_spen", "grammar_probe"},
    # benchmarks time every layer's pieces, the training loop's included
    "benchmarks": {"benchmarks", "ema_boundary", "modeling_spen", "grammar_probe", "train", "train_config", "training",
                   "eval"},
}
# The one file allowed above its layer: the `ema-boundary` command runs the report and the runner.
ENTRY_POINT = "ema_boundary/cli.py"
ENTRY_POINT_IMPORTS = {"ema_boundary", "eval"}
SCRIPTS = {"train"}  # modules that are run as scripts; so is every __main__ module
PUBLIC_OF_A_SCRIPT = {"main"}
# Layers that may use train.py's names: the benchmarks time the loop's pieces (training's own layer holds them).
SCRIPT_PARTNERS = {"benchmarks"}


def project_files(root: Path = ROOT) -> Iterator[tuple[str, Path]]:
    """(layer, file) for every Python file of the project's layers."""
    for layer in LAYERS:
        single = root / f"{layer}.py"
        if single.is_file():
            yield layer, single
        else:
            for path in sorted((root / layer).rglob("*.py")):
                yield layer, path


def imports(path: Path) -> Iterator[tuple[int, str, list[str], int]]:
    """(line, module, names imported from it, relative level) of every import in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, [], 0
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module or "", [a.name for a in node.names], node.level


def _where(path: Path, line: int) -> str:
    return f"{path.name}:{line}" if ROOT not in path.parents else f"{path.relative_to(ROOT)}:{line}"


def _allowed(module: str, allowed: set[str]) -> bool:
    """Whether ``module`` is (in) one of ``allowed``: a layer's name, or a dotted module of one."""
    return any(module == a or module.startswith(f"{a}.") for a in allowed)


def layer_violations(layer: str, root: Path = ROOT) -> list[str]:
    """Imports of ``layer``'s files that reach a layer it may not import."""
    bad = []
    for owner, path in project_files(root):
        if owner != layer:
            continue
        allowed = ENTRY_POINT_IMPORTS if path == root / ENTRY_POINT else LAYERS[layer]
        for line, module, _, level in imports(path):
            top = module.split(".")[0]
            if level == 0 and top in LAYERS and not _allowed(module, allowed):
                bad.append(f"{_where(path, line)} imports {module}")
    return bad


def script_violations(root: Path = ROOT) -> list[str]:
    """Uses of a script's names other than ``main``: ``from train import x`` or ``import train; train.x``."""
    bad = []
    for owner, path in project_files(root):
        if owner in SCRIPT_PARTNERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        script_names = set()  # local names bound to a script module by `import train`
        for line, module, names, level in imports(path):
            is_script = level == 0 and (module in SCRIPTS or module.endswith(".__main__"))
            if is_script and names and set(names) - PUBLIC_OF_A_SCRIPT:
                bad.append(f"{_where(path, line)} imports {sorted(set(names) - PUBLIC_OF_A_SCRIPT)} from {module}")
            if is_script and not names:
                script_names.add(module)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in script_names
                    and node.attr not in PUBLIC_OF_A_SCRIPT):
                bad.append(f"{_where(path, node.lineno)} uses {node.value.id}.{node.attr}")
    return bad


def test_every_top_level_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - {"tests"}
    modules = {p.stem for p in ROOT.glob("*.py")}
    assert packages | modules <= set(LAYERS), (packages | modules) - set(LAYERS)


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    bad = layer_violations(layer)
    assert not bad, f"{layer} may import only {sorted(LAYERS[layer]) or 'nothing of the project'}: {bad}"


def test_only_a_script_imports_the_entry_point() -> None:
    # ema_boundary/cli.py is the top: `python -m eval.report` (a __main__ script) is its one importer.
    entry = ENTRY_POINT.removesuffix(".py").replace("/", ".")
    bad = [_where(path, line) for _, path in project_files() if path.name != "__main__.py"
           for line, module, names, level in imports(path)
           if level == 0 and (module == entry or (module == "ema_boundary" and "cli" in names))]
    assert not bad, f"{entry} is the entry point at the top; imported by {bad}"


def test_modeling_spen_imports_itself_only_relatively() -> None:
    # Its files are copied beside a checkpoint, where no package named modeling_spen exists.
    bad = [f"{_where(path, line)} imports {module}" for layer, path in project_files() if layer == "modeling_spen"
           for line, module, _, level in imports(path) if level == 0 and module.split(".")[0] == "modeling_spen"]
    assert not bad, bad


def test_nothing_imports_a_scripts_internals() -> None:
    bad = script_violations()
    assert not bad, bad


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports (a package's ``from P import m`` is module ``P.m``), every import
    counted wherever it stands."""
    files = {module_name(path, root): path for _, path in project_files(root)}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for m, path in files.items():
        package = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for _, module, names, level in imports(path):
            if level:
                base = ".".join(package.split(".")[: len(package.split(".")) - level + 1])
                module = f"{base}.{module}" if module else base
            for target in [f"{module}.{n}" for n in names] or [module]:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != m:
                    graph[m].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    found = cycles(import_graph())
    assert not found, f"import circles (file level, imports inside functions included): {found}"


RUNNER_AND_REPORT = ("eval.sweep", "eval.report")


def experiment_violations(root: Path = ROOT) -> list[str]:
    """Imports of the runner or the report by an experiment (an eval module outside them; scripts aside)."""
    bad = []
    for m, targets in sorted(import_graph(root).items()):
        if m.split(".")[0] != "eval" or m.endswith("__main__") or _allowed(m, set(RUNNER_AND_REPORT)) or m == "eval":
            continue
        bad += [f"{m} imports {t}" for t in sorted(targets) if _allowed(t, set(RUNNER_AND_REPORT))]
    return bad


def test_experiments_import_neither_the_runner_nor_the_report() -> None:
    bad = experiment_violations()
    assert not bad, bad


def test_the_rules_are_the_documented_ones() -> None:
    doc = " ".join((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split())
    assert "`modeling_spen/` imports nothing of the project's" in doc
    assert ("`ema_boundary/` imports nothing of the project's either, but for its one entry point at the top, "
            "`ema_boundary/cli.py` (the `ema-boundary` command), which may import `eval`") in doc
    assert ("`eval/` reaches training only through `train_config` (settings), `train.main(argv)` (a run) and "
            "`training/checkpoint.py` (checkpoints' one home)") in doc


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    # The rules can fail: a lazy import of eval from grammar_probe, of modeling_spen's neighbours, and of a
    # script's internals are all found.
    (tmp_path / "grammar_probe").mkdir()
    (tmp_path / "grammar_probe" / "bad.py").write_text(
        "def f():\n    from eval.probes import render\n    import train\n    return train.lm_loss\n")
    (tmp_path / "modeling_spen").mkdir()
    (tmp_path / "modeling_spen" / "bad.py").write_text("from .configuration_spen import TRACES\nimport ema_boundary\n")
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "ok.py").write_text("import train\nfrom eval.probes.__main__ import main\ntrain.main([])\n"
                                             "from training.checkpoint import load_state_file\n")
    (tmp_path / "eval" / "bad.py").write_text("from training.loss import lm_loss\n")
    (tmp_path / "ema_boundary").mkdir()
    (tmp_path / "ema_boundary" / "cli.py").write_text("from eval.report.plan import Plan\n")  # the entry point
    (tmp_path / "ema_boundary" / "io.py").write_text("from eval.runs import read_metrics\n")
    assert layer_violations("grammar_probe", tmp_path) == ["bad.py:2 imports eval.probes", "bad.py:3 imports train"]
    assert layer_violations("modeling_spen", tmp_path) == ["bad.py:2 imports ema_boundary"]
    assert layer_violations("eval", tmp_path) == ["bad.py:1 imports training.loss"]
    assert layer_violations("ema_boundary", tmp_path) == ["io.py:1 imports eval.runs"]
    assert script_violations(tmp_path) == ["bad.py:4 uses train.lm_loss"]


MAX_LINES = 700
PRAGMA = re.compile(r"noqa(:\s*[A-Z]+[0-9]+(,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[^]]*\])?")


def source_files(root: Path = ROOT) -> Iterator[Path]:
    """Every Python file outside tests: the project's layers and the research notes under docs/."""
    yield from (path for _, path in project_files(root))
    yield from sorted((root / "docs").rglob("*.py"))


def uncommented_deferred_imports(path: Path) -> list[str]:
    """The imports inside a function that give no reason: a reason is a comment (more than a noqa or type pragma) on
    the import's own lines, or on the line above the run of imports (blank lines allowed) that it belongs to."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    comments = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT and re.search("[a-z]", PRAGMA.sub("", tok.string))}
    deferred = {node for fn in ast.walk(ast.parse(text, str(path)))
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))}
    import_lines = {line for node in deferred for line in range(node.lineno, node.end_lineno + 1)}
    bad = []
    for node in sorted(deferred, key=lambda n: n.lineno):
        if comments & set(range(node.lineno, node.end_lineno + 1)):
            continue
        above = node.lineno - 1
        while above and (above in import_lines or not lines[above - 1].strip()):
            above -= 1
        if not (above in comments and lines[above - 1].lstrip().startswith("#")):
            bad.append(f"{_where(path, node.lineno)}: {lines[node.lineno - 1].strip()}")
    return bad


def long_files(root: Path = ROOT) -> list[str]:
    return [f"{path.relative_to(root)}: {n} lines" for path in source_files(root)
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES]


def test_every_import_inside_a_function_says_why() -> None:
    bad = [line for path in source_files() for line in uncommented_deferred_imports(path)]
    assert not bad, "imports inside a function with no comment saying why:\n" + "\n".join(bad)


def test_no_file_outside_tests_is_over_700_lines() -> None:
    assert not long_files(), long_files()


def test_an_uncommented_deferred_import_and_a_long_file_are_seen(tmp_path: Path) -> None:
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "lazy.py").write_text(
        "def a():\n    import json\n\n"
        "def b():\n    import triton  # optional: the triton extra\n\n"
        "def c():\n    # deferred: torch, for --help\n    import torch\n\n    from eval import gap\n\n"
        "def d():\n    import modeling_spen  # noqa: F401\n\n"
        "def e():\n    x = 1  # a comment, but not the import's\n    import yaml\n")
    (tmp_path / "eval" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "eval" / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert uncommented_deferred_imports(tmp_path / "eval" / "lazy.py") == [
        "lazy.py:2: import json", "lazy.py:14: import modeling_spen  # noqa: F401", "lazy.py:18: import yaml"]
    assert long_files(tmp_path) == [f"eval/long.py: {MAX_LINES + 1} lines"]


def test_a_circle_and_an_experiment_that_imports_the_runner_are_seen(tmp_path: Path) -> None:
    # A circle closed by an import inside a function (eval.depth -> the runner's alias -> eval.depth, as before
    # issue 50), and the experiment's import of the runner, are both found; the script that joins them is not.
    (tmp_path / "eval" / "sweep").mkdir(parents=True)
    (tmp_path / "eval" / "__init__.py").write_text("")
    (tmp_path / "eval" / "sweep" / "__init__.py").write_text("")
    (tmp_path / "eval" / "sweep" / "alias.py").write_text("from eval import depth\n")
    (tmp_path / "eval" / "depth.py").write_text("def main():\n    from eval.sweep.alias import run\n")
    assert cycles(import_graph(tmp_path)) == [["eval.depth", "eval.sweep.alias"]]
    assert experiment_violations(tmp_path) == ["eval.depth imports eval.sweep.alias"]
    (tmp_path / "eval" / "depth.py").write_text("")
    (tmp_path / "eval" / "__main__.py").write_text("from eval.sweep.alias import main\n")
    assert cycles(import_graph(tmp_path)) == [] and experiment_violations(tmp_path) == []
