"""Write the local data files that the task YAMLs in eval/tasks read (paths relative to the repo root).

    python -m eval.make_data all                        # both, into outputs/eval_data/
    python -m eval.make_data pydoc                      # outputs/eval_data/pydoc_validation.jsonl
    python -m eval.make_data grammar                    # builds the grammar corpus, then the task files
    python -m eval.make_data grammar --dataset DIR      # from a folder of `python -m grammar_probe build`

The output folder is this tool's: it is written atomically, a part that is already there is replaced only with
``--overwrite_output_dir`` (the other part is kept), and a folder holding anything else is refused.

Grammar task design (multiple choice, documented in docs/evaluation.md): one item per sentence, at one
word chosen deterministically among the sentence's words (the final "." is excluded: its role is always
END). The model scores the 20 role descriptions as continuations of

    Sentence: the old dog saw a cat .
    Word 3: "dog"
    Role:

and the answer is the description with the highest log-likelihood (acc) or per-byte log-likelihood
(acc_norm). Chance is 1/20. Few-shot examples (--num_fewshot) come from the train split.
"""

from __future__ import annotations

import random
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from ema_boundary.io import OutputError, atomic_dir, check_output_dir, output_owner, write_jsonl
from ema_boundary.usage import EXIT_USAGE, UsageError, UsageParser, add_output_dir, first_line
from grammar_probe.grammar import ROLES

TOOL = "eval.make_data"  # whose output folder this is (ema_boundary.io's marker)
DEFAULT_OUT = Path("outputs/eval_data")
PARTS = {"pydoc": "pydoc_validation.jsonl", "grammar": "grammar"}  # what each command writes in the folder
PYDOC_VAL_EVERY = 10  # train.py's hub_configs/*-tiny/train.yaml hold out every 10th help topic
GRAMMAR_TASK_SPLITS = ("train", "test_within_a", "test_transfer_b", "test_deep", "test_novel_words",
                       "test_counterfactual")

# The choices of the grammar task, in ClassLabel order: the roles' own descriptions. They must equal
# doc_to_choice in eval/tasks/grammar_roles/_grammar_roles_template.yaml; tests/test_eval_tasks.py checks it.
ROLE_DESCRIPTIONS: dict[str, str] = {r.name: r.description for r in ROLES}


def write_pydoc(out: Path = DEFAULT_OUT) -> Path:
    """The help topics train.py holds out of the embedded corpus (they come first in it, so `embedded` and
    `embedded:pydoc` hold out the same 8) as `pydoc_validation.jsonl`."""
    from ema_boundary import corpus  # deferred: datasets and transformers; --help and a bad flag answer without them

    docs = [d["text"] for d in corpus.documents([corpus.EMBEDDED_PYDOC], "validation", PYDOC_VAL_EVERY)]
    out.mkdir(parents=True, exist_ok=True)
    path = out / PARTS["pydoc"]
    write_jsonl(path, [{"text": t} for t in docs])
    return path


def grammar_items(split, split_name: str) -> list[dict]:
    """One multiple-choice item per sentence of a grammar-corpus split (a `datasets.Dataset`)."""
    names = split.features["roles"].feature.names
    if list(names) != list(ROLE_DESCRIPTIONS):
        raise UsageError(f"grammar corpus: role names {names} differ from eval.make_data.ROLE_DESCRIPTIONS")
    items = []
    for i, row in enumerate(split):
        words, roles = row["tokens"], row["roles"]
        candidates = [j for j, r in enumerate(roles) if names[r] != "END"] or list(range(len(words)))
        # Seeded by split and row, so regenerating the files gives the same items.
        j = random.Random(f"eval-grammar/{split_name}/{i}").choice(candidates)
        items.append({"sentence": " ".join(words), "position": j + 1, "word": words[j], "label": roles[j],
                      "role": names[roles[j]], "depth": row["depth"], "grammar": row["grammar"]})
    return items


def write_grammar(dataset: str | Path | None = None, out: Path = DEFAULT_OUT) -> Path:
    """Task files `grammar/<split>.jsonl` from a grammar-corpus folder (built with defaults if None)."""
    # deferred: the corpus builder imports datasets and pandas; --help and a bad flag answer without them
    from grammar_probe.dataset import DatasetFormatError, build_dataset, load_grammar_dataset

    try:
        ds = build_dataset() if dataset is None else load_grammar_dataset(dataset)
    except DatasetFormatError as e:
        raise UsageError(f"--dataset: {e}") from None
    missing = [s for s in GRAMMAR_TASK_SPLITS if s not in ds]
    if missing:
        raise UsageError(f"--dataset {dataset}: splits {missing} are missing")
    folder = out / PARTS["grammar"]
    folder.mkdir(parents=True)
    for name in GRAMMAR_TASK_SPLITS:
        write_jsonl(folder / f"{name}.jsonl", grammar_items(ds[name], name))
    return folder


def make_data(parts: Sequence[str], out: Path = DEFAULT_OUT, dataset: str | Path | None = None,
              overwrite: bool = False) -> list[Path]:
    """Write ``parts`` ("pydoc", "grammar") into the folder ``out``, atomically; returns what was written.

    ``out`` is this tool's folder: a part already there is replaced only with ``overwrite``, the parts not
    asked for are kept, and a folder that is not this tool's output is refused (nothing written)."""
    out = Path(out)
    own = output_owner(out) == TOOL
    present = [p for p in parts if (out / PARTS[p]).exists()] if own else []
    if present and not overwrite:
        raise OutputError(f"{out}: already holds {', '.join(PARTS[p] for p in present)} of {TOOL}; pass "
                          "--overwrite_output_dir to replace it")
    # Adding a part to this tool's own folder replaces nothing of the user's, so it needs no flag.
    check_output_dir(out, tool=TOOL, overwrite=own)
    if dataset is not None and not Path(dataset).is_dir():
        raise UsageError(f"--dataset {dataset}: no such folder")
    written = []
    with atomic_dir(out, tool=TOOL, overwrite=own) as tmp:
        for kept in (p for p in PARTS if p not in parts and own and (out / PARTS[p]).exists()):
            source, target = out / PARTS[kept], tmp / PARTS[kept]
            if source.is_dir():
                shutil.copytree(source, target)
            else:
                shutil.copy2(source, target)
        if "pydoc" in parts:
            written.append(out / write_pydoc(tmp).name)
        if "grammar" in parts:
            written.append(out / write_grammar(dataset, tmp).name)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    p = UsageParser(prog="python -m eval.make_data", description="Write the data files of eval/tasks.")
    p.add_argument("what", choices=["pydoc", "grammar", "all"])
    add_output_dir(p, "folder (the task YAMLs read this one, relative to the working directory)",
                   required=False, default=str(DEFAULT_OUT))
    p.add_argument("--dataset", help="grammar corpus folder from `python -m grammar_probe build` "
                   "(default: build one with the default settings)")
    args = p.parse_args(argv)
    try:
        parts = list(PARTS) if args.what == "all" else [args.what]
        for path in make_data(parts, Path(args.output_dir), args.dataset, args.overwrite_output_dir):
            print(path)
    except UsageError as e:
        print(f"{p.prog}: error: {first_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
