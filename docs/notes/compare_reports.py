"""Compare every number of two report.json files (a refactor must not change any result).

    python docs/notes/compare_reports.py BEFORE/report.json AFTER/report.json [--strings] [--tolerance 0]

Both documents are walked recursively (dicts by key, lists by index). Every number of BEFORE (int or float, not
bool) is looked up at the same path in AFTER, after the moves of :data:`MOVED` (blocks that the one-schema
change de-duplicated: ``identity_at_lag`` -> ``probes.identity_at_lag`` ...) and the renames of :data:`RENAMED`
(the SPEN variant names: ``spen-linattn-seq`` -> ``linear_attention-sequence`` ...); ``--strings`` compares
strings too.
Wall-clock times and load averages (:data:`TIMINGS`) differ between any two runs and are skipped. NaN equals NaN.

Prints the count compared, each difference (path, before, after), the numbers of BEFORE missing from AFTER and
the count of numbers only AFTER has (new blocks). Exit status 0 when nothing compared differs and nothing is
missing, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Path_ = tuple[str, ...]

# Old path prefix -> new path prefix ("*" matches one key, kept). The blocks report.json held twice before the
# schema change; the old top-level copies are gone, the numbers live on under ``probes``.
MOVED: list[tuple[Path_, Path_]] = [
    (("identity_at_lag", "*", "accuracy"), ("probes", "identity_at_lag", "*", "best")),
    (("identity_at_lag",), ("probes", "identity_at_lag")),
    (("recall",), ("probes", "recall")),
    (("recall_control",), ("probes", "positive_control")),
    (("probe_command",), ("probes", "command")),
]
# Names that changed with the SPEN variant table (modeling_spen/variants.py): one name per variant, in the recall
# map and the trace ablation alike. (prefix, position of the renamed key, old -> new).
RECALL_NAMES = {"spen-none": "none", "spen-linear": "linear", "spen-linattn-state": "linear_attention-state",
                "spen-linattn-seq": "linear_attention-sequence", "spen-softmax-state": "softmax_attention-state",
                "spen-softmax-seq": "softmax_attention-sequence", "spen-linear-learned": "linear-learned",
                "spen-linear-selective": "linear-selective"}
TRACE_ARMS = {"ema": "linear", "learned": "linear-learned", "selective": "linear-selective"}
RENAMED: list[tuple[Path_, int, dict[str, str]]] = [
    (("probes", "recall"), 2, RECALL_NAMES),
    (("probes", "models"), 2, RECALL_NAMES),
    (("traces", "final_loss"), 2, TRACE_ARMS),
    (("traces", "final_loss_per_seed"), 2, TRACE_ARMS),
    (("traces", "comparisons"), 2, TRACE_ARMS),
    (("traces", "regime", "tokens_per_parameter"), 3, TRACE_ARMS),
    (("traces", "regime", "parameters"), 3, TRACE_ARMS),
]
# Keys whose values are wall-clock measurements (or derived from them): never equal across two runs.
TIMINGS = {"seconds", "stage_seconds", "load_average_at_end", "written"}


def leaves(obj: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """(path, value) of every scalar below ``obj``; list indices as strings."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, (*path, str(k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, (*path, str(i)))
    else:
        yield path, obj


def moved(path: Path_) -> list[Path_]:
    """``path`` of BEFORE as AFTER may spell it, most changed first: the first matching rule of :data:`MOVED`,
    then :data:`RENAMED` (a report of the old names migrated to the new schema keeps its names)."""
    for old, new in MOVED:
        if len(path) >= len(old) and all(o in ("*", p) for o, p in zip(old, path, strict=False)):
            stars = iter(p for o, p in zip(old, path, strict=False) if o == "*")
            path = (*[next(stars) if n == "*" else n for n in new], *path[len(old):])
            break
    for prefix, at, names in RENAMED:
        if path[:len(prefix)] == prefix and len(path) > at and path[at] in names:
            return [(*path[:at], names[path[at]], *path[at + 1:]), path]
    return [path]


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def equal(a: Any, b: Any, tolerance: float) -> bool:
    if is_number(a) and is_number(b):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= tolerance * max(abs(a), abs(b))
    return a == b


def compare(before: Any, after: Any, strings: bool = False, tolerance: float = 0.0) -> dict[str, Any]:
    """{"compared", "renamed" (compared at a moved or renamed key), "differences": [(path, a, b)], "missing": [path],
    "only_after": int}."""
    kinds = (is_number, lambda x: isinstance(x, str)) if strings else (is_number,)
    wanted = lambda x: any(k(x) for k in kinds)  # noqa: E731
    after_leaves = {p: v for p, v in leaves(after) if not TIMINGS & set(p)}
    seen: set[Path_] = set()
    out: dict[str, Any] = {"compared": 0, "renamed": 0, "differences": [], "missing": []}
    for path, a in leaves(before):
        if TIMINGS & set(path) or not wanted(a):
            continue
        new = next((p for p in moved(path) if p in after_leaves), None)
        if new is None:
            out["missing"].append(path)
            continue
        seen.add(new)
        out["compared"] += 1
        out["renamed"] += new != path
        if not equal(a, after_leaves[new], tolerance):
            out["differences"].append((path, a, after_leaves[new]))
    out["only_after"] = sum(1 for p, v in after_leaves.items() if wanted(v) and p not in seen)
    return out


def _load(path: str) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))  # NaN / Infinity literals are accepted


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--strings", action="store_true", help="compare strings as well as numbers")
    p.add_argument("--tolerance", type=float, default=0.0, help="relative tolerance for numbers (default: exact)")
    args = p.parse_args(argv)
    r = compare(_load(args.before), _load(args.after), args.strings, args.tolerance)
    dotted = ".".join
    print(f"compared {r['compared']} values ({r['renamed']} at a de-duplicated key), "
          f"{len(r['differences'])} differ, {len(r['missing'])} of BEFORE missing in AFTER, "
          f"{r['only_after']} only in AFTER")
    for path, a, b in r["differences"]:
        print(f"  differs: {dotted(path)}: {a!r} -> {b!r}")
    for path in r["missing"]:
        print(f"  missing: {dotted(path)}")
    return 0 if not r["differences"] and not r["missing"] else 1


if __name__ == "__main__":
    sys.exit(main())
