"""The dataset card (README.md with a YAML header), generated from the grammar tables and the ceilings."""

from __future__ import annotations

from datasets import DatasetDict

from grammar_probe.grammar import (
    DEV_RESERVE_LEXICON,
    LEXICON,
    OPEN_CLASSES,
    RESERVE_LEXICON,
    ROLES,
    Grammar,
    grammar_a,
    grammar_b,
)


def _yaml_header(dataset: DatasetDict) -> str:
    lines = [
        "---",
        "language:",
        "- en",
        "pretty_name: Grammar-probe role corpus (grammars A and B)",
        "task_categories:",
        "- token-classification",
        "size_categories:",
        "- 10K<n<100K",
        "configs:",
        "- config_name: default",
        "  data_files:",
    ]
    for split in dataset:
        lines += [f"  - split: {split}", f"    path: data/{split}.parquet"]
    lines.append("---")
    return "\n".join(lines)


def _rules_table(grammar: Grammar) -> str:
    rows = ["| rule | p | right-hand side | embeds |", "|---|---|---|---|"]
    for lhs, alts in grammar.rules.items():
        total = sum(a.weight for a in alts)
        for a in alts:
            rhs = " ".join(a.symbols) or "ε"
            rows.append(f"| {lhs} | {a.weight / total:.2f} | `{rhs}` | {'yes' if a.embeds else ''} |")
    return "\n".join(rows)


def _examples(dataset: DatasetDict, split: str, n: int) -> str:
    names = dataset[split].features["roles"].feature.names
    out = []
    for row in dataset[split].select(range(min(n, len(dataset[split])))):
        pairs = " ".join(f"{t}/{names[r]}" for t, r in zip(row["tokens"], row["roles"], strict=True))
        out.append(f"- (depth {row['depth']}) {pairs}")
    return "\n".join(out)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def ceilings_table(ceilings: dict) -> str:
    """Markdown: each role with its derived kind and its ceilings (accuracy, %)."""
    k_best = ceilings["best_k"]
    head = ("| role | kind | causal | bidirectional | causal, nouns/verbs <unk> | "
            + " | ".join(f"window k={k}" for k in range(1, ceilings["thresholds"]["max_window"] + 1))
            + f" | best window (k={k_best}) | id causal | id best window |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for role, c in ceilings["roles"].items():
        windows = {int(k): v for k, v in c["window_k"].items()}
        ident = {int(k): v for k, v in c["id_window_k"].items()}
        id_best = max(v for k, v in ident.items() if k >= 1)
        rows.append(
            f"| {role} | {c['kind']} | {_pct(c['causal'])} | {_pct(c['bidirectional'])} | {_pct(c['causal_unseen'])} | "
            + " | ".join(_pct(windows[k]) for k in sorted(windows) if k >= 1)
            + f" | {_pct(c['window_best'])} | {_pct(c['id_causal'])} | {_pct(id_best)} |"
        )
    return "\n".join(rows)


def split_ceilings_table(ceilings: dict) -> str:
    """Markdown: the exact causal / bidirectional ceilings of every evaluation split, per kind."""
    kinds = {r: c["kind"] for r, c in ceilings["roles"].items()}
    order = ("structural", "local", "lexical", "ambiguous")
    rows = ["| split | " + " | ".join(f"{k} causal / bidir." for k in order) + " | all causal / bidir. |",
            "|---|" + "---|" * (len(order) + 1)]
    for split, roles in ceilings["splits"].items():
        cells = []
        for kind in (*order, None):
            sel = [c for r, c in roles.items() if kind is None or kinds.get(r) == kind]
            n = sum(c["tokens"] for c in sel)
            if not n:
                cells.append("—")
                continue
            cau = sum(c["causal"] * c["tokens"] for c in sel) / n
            bid = sum(c["bidirectional"] * c["tokens"] for c in sel) / n
            cells.append(f"{_pct(cau)} / {_pct(bid)}")
        rows.append(f"| {split} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def dataset_card(dataset: DatasetDict, build_args: dict, ceilings: dict | None = None) -> str:
    """The README.md of a dataset folder."""
    a, b = grammar_a(), grammar_b()
    descriptions = "\n".join(f"| {r.name} | {r.description} |" for r in ROLES)
    classes = "\n".join(
        f"| {cls} | {len(words)} | {', '.join(words)} | {', '.join(DEV_RESERVE_LEXICON.get(cls, ())) or '—'} | "
        f"{', '.join(RESERVE_LEXICON.get(cls, ())) or '—'} |"
        for cls, words in LEXICON.items()
    )
    stats = "\n".join(
        f"| {split} | {len(ds)} | {sum(len(t) for t in ds['tokens'])} | "
        f"{min(ds['depth'])}–{max(ds['depth'])} | {ds[0]['grammar']} |"
        for split, ds in dataset.items()
    )
    args = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in build_args.items()) or "(defaults)"
    examples = "\n\n".join(f"**{split}**\n\n{_examples(dataset, split, 3)}" for split in dataset)
    if ceilings is None:
        ceiling_text = "Not computed for this folder (`python -m grammar_probe build` computes them)."
    else:
        cfg, th = ceilings["config"], ceilings["thresholds"]
        ceiling_text = f"""Computed by `grammar_probe.ceilings` from a fresh grammar-A sample
({cfg['ceiling_sentences']} sentences for the exact posteriors, {cfg['window_sentences']} for the window tables;
independent of every split). Accuracy in %: the per-role accuracy of the best tagger with that information. *causal*:
the words up to and including the token, exact (the grammar's own posterior). *bidirectional*:
the whole sentence, exact. *window k*: the current word and k previous words; lookup tables fitted
on half of the sample and scored on the other half (a lower bound; the in-sample upper bounds are in
`ceilings.json`). *id*: the posterior given to the true role, averaged over the role's tokens.

Kind rule (thresholds fixed in code): **ambiguous** if causal < {_pct(th['high'])}; else **structural**
if the best window's id (k ≤ {th['max_window']}) is at least {_pct(th['gap'])} points below the causal id;
else **lexical** if the word alone reaches the causal id within {_pct(th['word_tol'])} points or nouns/verbs
as `<unk>` cost at least {_pct(th['gap'])} points; else **local** (a short window decides).

{ceilings_table(ceilings)}

Exact ceilings of each evaluation split on its own sentences (nonce words read as `<unk>`), per kind:

{split_ceilings_table(ceilings)}"""
    return f"""{_yaml_header(dataset)}

# Grammar-probe role corpus

A controlled formal-language corpus for grammatical role assignment: 20 roles, 147 training words,
two grammars (A for training and in-domain tests, B for transfer), deeper embedding, nonce words and
a counterfactual word->role split held out. Built by `python -m grammar_probe build {args}`; the same
arguments give a byte-identical dataset. Load with `datasets.load_from_disk(DIR)` or
`datasets.load_dataset(DIR)`; `ceilings.json` holds the ceilings below.

## Features
- `tokens`: the words of the sentence (the full stop is a token);
- `roles`: one `ClassLabel` per token (names below, in label order);
- `depth`: clause-embedding depth (0 = no relative or complement clause);
- `grammar`: `A`, `B` or `A_counterfactual`.

## Splits

| split | sentences | tokens | depth | grammar |
|---|---|---|---|---|
{stats}

`test_deep` holds only sentences deeper than any training sentence. `validation_novel_words` and
`test_novel_words` fill every open-class slot ({', '.join(OPEN_CLASSES)}) with nonce words never seen in
training: development nonce words for validation, other nonce words for the test. `test_counterfactual`
reverses the word->role correlation of training (there 85% of subjects are persons and 85% of
objects are animals; here every subject is an animal and every object a person). No sentence occurs
in two splits.

## Roles and their computed kinds and ceilings

| role | meaning |
|---|---|
{descriptions}

{ceiling_text}

## Word classes

| class | n | training words | development nonce words | test nonce words |
|---|---|---|---|---|
{classes}

## Grammar A (train, validation, test_within_a, test_deep, test_novel_words; counterfactual with the noun bias reversed)
Terminals are `class:ROLE`; a word is drawn uniformly from the class. An `embeds` alternative opens a
nested clause and is unavailable at the depth cap.

{_rules_table(a)}

## Grammar B (test_transfer_b)

{_rules_table(b)}

## Examples (word/ROLE)

{examples}
"""
