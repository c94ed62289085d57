"""The dataset card (README.md with a YAML header), generated from the grammar tables themselves."""

from __future__ import annotations

from datasets import DatasetDict

from grammar_probe.grammar import LEXICON, RESERVE_LEXICON, ROLES, Grammar, grammar_a, grammar_b


def _yaml_header(dataset: DatasetDict) -> str:
    lines = [
        "---",
        "language:",
        "- en",
        "pretty_name: Grammar-probe role corpus (grammars A and B)",
        "task_categories:",
        "- token-classification",
        "size_categories:",
        "- 1K<n<10K",
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


def dataset_card(dataset: DatasetDict, build_args: dict) -> str:
    a, b = grammar_a(), grammar_b()
    roles = "\n".join(f"| {r.name} | {r.kind} | {r.description} |" for r in ROLES)
    classes = "\n".join(
        f"| {cls} | {len(words)} | {', '.join(words)} | {', '.join(RESERVE_LEXICON.get(cls, ())) or '—'} |"
        for cls, words in LEXICON.items()
    )
    stats = "\n".join(
        f"| {split} | {len(ds)} | {sum(len(t) for t in ds['tokens'])} | "
        f"{min(ds['depth'])}–{max(ds['depth'])} | {ds[0]['grammar']} |"
        for split, ds in dataset.items()
    )
    args = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in build_args.items()) or "(defaults)"
    examples = "\n\n".join(
        f"**{split}**\n\n{_examples(dataset, split, 3)}" for split in dataset
    )
    return f"""{_yaml_header(dataset)}

# Grammar-probe role corpus

A controlled formal-language corpus for grammatical role assignment: 20 roles, 147 training words,
two grammars (A for training and in-domain tests, B for transfer), deeper embedding and nonce words
in held-out splits. Built by `python -m grammar_probe build {args}`; the same arguments give a
byte-identical dataset. Load with `datasets.load_from_disk(DIR)` or `datasets.load_dataset(DIR)`.

## Features
- `tokens`: the words of the sentence (the full stop is a token);
- `roles`: one `ClassLabel` per token (names below, in label order);
- `depth`: clause-embedding depth (0 = no relative or complement clause);
- `grammar`: `A` or `B`.

## Splits

| split | sentences | tokens | depth | grammar |
|---|---|---|---|---|
{stats}

`test_deep` holds only sentences deeper than any training sentence; `test_novel_words` fills every
open-class slot (adjective, noun, verb, adverb) with a reserve nonce word never seen in training.
No sentence occurs in two splits.

## Roles
*Structural* roles share word forms with other roles; position alone decides (the same "the" is
DET_AGENT, DET_PATIENT or DET_OBLIQUE). *Lexical* roles are decided by the word's identity within
a slot (a verb's class decides VERB_TRANS vs VERB_INTRANS vs VERB_COMM).

| role | kind | meaning |
|---|---|---|
{roles}

## Word classes

| class | words | training words | reserve (novel) words |
|---|---|---|---|
{classes}

## Grammar A (train, validation, test_within_a, test_deep, test_novel_words)
Terminals are `class:ROLE`; a word is drawn uniformly from the class. An `embeds` alternative opens a
nested clause and is unavailable at the depth cap.

{_rules_table(a)}

## Grammar B (test_transfer_b)

{_rules_table(b)}

## Examples (word/ROLE)

{examples}
"""
