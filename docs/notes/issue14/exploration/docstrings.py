# ruff: noqa
# Exploration script of issue 14 phase 1, kept as run (from a scratch folder, as rc/docstrings.py) so that the note's numbers can be reproduced.
# Run from the repository root with PYTHONPATH=. ; see docs/notes/issue14-phase1.md.
"""How much English text (docstrings) does a CPython install carry? Parse the stdlib with ast (no imports)."""
import ast, sys, sysconfig, time
from pathlib import Path
t0 = time.time()
root = Path(sysconfig.get_paths()["stdlib"])
total = n_doc = files = 0
for path in root.rglob("*.py"):
    parts = set(path.relative_to(root).parts)
    if "site-packages" in parts or "test" in parts or "tests" in parts or "idle_test" in parts:
        continue
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except Exception:
        continue
    files += 1
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc) > 40:
                total += len(doc); n_doc += 1
print(f"stdlib {root}: {files} files (tests and site-packages excluded), {n_doc} docstrings > 40 chars, {total:,} chars, {time.time()-t0:.1f}s")
