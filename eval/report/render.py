"""The report's index.md (a short paper) and its figures, rendered from report.json alone."""

from __future__ import annotations

import math
import shlex
import statistics
import textwrap
from pathlib import Path

from ema_boundary.format import count, pct
from ema_boundary.paper import ARXIV
from ema_boundary.verdicts import Verdict
from eval.probes.render import render_content_probes_markdown
from eval.recall_arms import WRITE_RULES
from eval.report.claim_checks import EXPERIMENTS
from eval.report.claim_rows import one_screen, outside_text, short_name, short_verdict, verdict_text
from eval.report.claims import INVERTIBILITY
from eval.report.committed import escape_tables
from eval.report.conditions import PROTOCOL_NAMES, structure_conditions, value_text
from eval.report.paths import portable
from grammar_probe.render import render_structure_markdown

LABELS = {"spen": "SPEN (EMA traces)", "gpt2_arch": "GPT-2 architecture"}


def _ci(s: dict, digits: int = 3) -> str:
    if s.get("ci95") is None:  # one value (e.g. a ladder size with one seed): no interval
        return f"{s['mean']:.{digits}f}"
    lo, hi = s["ci95"]
    if not math.isfinite(lo):
        return f"{s['mean']:.{digits}f}"
    return f"{s['mean']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _preconditions(row: dict) -> str:
    """The row's preconditions with their numbers: holds / fails / not measured."""
    said = {True: "holds", False: "**fails**", None: "not measured"}
    return "; ".join(f"{p['text']}: {said[p['holds']]} ({p['numbers']})" for p in row["preconditions"]) or "—"


def _headline_pair(c: dict, figure_paths: dict[str, str]) -> list[str]:
    """The headline pair: its regime (parameters total and non-embedding, tokens per parameter, the held-out
    blocks that chose the rates and those that score the runs), the losses against the n-gram lines, the rates
    tried, the paired comparison, then the learning curves."""
    reg, cmp_ = c["regime"], c["comparison"]
    by = reg["by_architecture"]
    epochs = f"{reg['epochs']:.2f} epochs" if reg["epochs"] else "under one epoch (streamed)"
    on_test = c.get("scored_on") == "test"
    counts = c.get("parameter_counts")
    if counts:
        size = " and ".join(
            f"{counts[n]['total']:,} ({LABELS[n]}; {counts[n]['non_embedding']:,} non-embedding, "
            f"{by[n]['tokens_per_non_embedding_parameter']:.1f} tokens per non-embedding parameter)"
            for n in ("spen", "gpt2_arch"))
    else:
        size = f"{reg['parameters']:,} (SPEN) and {by['gpt2_arch']['parameters']:,} (GPT-2)"
    held_out = (f"The rates were chosen on {reg['val_tokens']:,} validation tokens; every seed is scored on "
                f"**{reg['test_tokens']:,} test tokens from {reg['test_documents']} other documents** (neither trained "
                "on nor used to choose), and the perplexities, the comparison and the n-gram lines below read them."
                if on_test and "test_tokens" in reg else
                f"The {reg['val_tokens']:,} validation tokens chose the rate and score the run (both architectures "
                "alike; these runs hold out no test documents).")
    scored = "test" if on_test else "validation"
    lines = [
        "## Content in detail: the headline pair in a stated regime",
        "",
        f"**Regime.** Parameters {size}; {reg['train_tokens']:,} training tokens each = "
        f"**{reg['tokens_per_parameter']:.1f} tokens per parameter** (SPEN), {epochs} over the training split. Same "
        "data, order, tokenizer, steps and schedule; each architecture's learning rate chosen on validation from "
        f"the grid the plan declared (below), then trained with {c['val_loss']['spen']['n']} seeds. {held_out}",
        "",
        "| model | parameters | lr (rates tried: validation loss) | training loss | validation loss |"
        + (" test loss |" if on_test else "") + f" {scored} perplexity |",
        "|---|---:|---|---:|---:|" + ("---:|" if on_test else "") + "---:|",
    ]
    for name in ("spen", "gpt2_arch"):
        lr = c["learning_rate"][name]
        grid = ", ".join(f"{k}{'*' if v.get('extension') else ''}: {v['final_val_loss']:.3f}"
                         for k, v in lr["grid"].items())
        lines.append(f"| {LABELS[name]} | {c['parameters'][name]:,} | **{lr['chosen']:g}** ({grid}) | "
                     f"{_ci(c['train_loss'][name])} | {_ci(c['val_loss'][name])} | "
                     + (f"{_ci(c['test_loss'][name])} | " if on_test else "") + f"{c['perplexity'][name]:.1f} |")
    ng = c["ngram"]
    dash = "— | " * (3 if on_test else 2)  # parameters, rate, training loss (and validation loss): none
    lines += [
        *[f"| {k} model (Kneser-Ney, counted on the training split) | — | {dash}{math.log(ng[k]):.3f} | "
          f"{ng[k]:.1f} |" for k in ("unigram", "bigram", "trigram")],
        "",
        f"SPEN − GPT-2 ({scored} loss): **{cmp_['difference']:+.4f} nats** [95% CI {cmp_['ci95'][0]:+.4f}, "
        f"{cmp_['ci95'][1]:+.4f}], {cmp_['n']} paired seeds: a perplexity ratio of **{c['perplexity_ratio']:.2f}x** "
        f"[{c['perplexity_ratio_ci95'][0]:.2f}, {c['perplexity_ratio_ci95'][1]:.2f}] "
        f"(verdict: {cmp_['verdict']}, equivalence margin ±{cmp_['equivalence_margin']:g} nats). Intervals are "
        "95% t intervals over seeds.",
        "",
        *_rate_lines(c),
        f"![learning curves]({figure_paths['learning_curves']})",
    ]
    return lines


def _rate_lines(c: dict) -> list[str]:
    """Whether each chosen rate is interior to the rates tried; "edge" stated where it is not."""
    lines = []
    for name in ("spen", "gpt2_arch"):
        lr = c["learning_rate"][name]
        rates = sorted(map(float, lr["grid"]))
        interior = lr.get("interior", len(rates) > 2 and lr["chosen"] not in (rates[0], rates[-1]))
        rule = lr.get("grid_rule")
        if interior:
            lines.append(f"- {LABELS[name]}: rate {lr['chosen']:g} is interior to the rates tried"
                         + (f" ({rule})" if rule else "") + ".")
        else:
            lines.append(f"- {LABELS[name]}: rate {lr['chosen']:g} is at the **edge** of the rates tried "
                         f"({rule or 'no extension rule'}): its best rate may lie beyond them, and the comparison "
                         "is at the best rate *tried*.")
    if any(v.get("extension") for n in ("spen", "gpt2_arch") for v in c["learning_rate"][n]["grid"].values()):
        lines.append("- \\* a rate added beyond the declared grid by the plan's rule (`extend_grid`).")
    return [*lines, ""]


def _gap_section(report: dict, figure_paths: dict[str, str]) -> list[str]:
    """Where the headline pair's gap lives (eval.gap): SPEN minus GPT-2 per token class, the contrast the claim
    reads and the claim's verdict beside its numbers. Nothing for a report without the stage."""
    gap = report.get("gap")
    if not gap:
        return []
    text = gap["text"]

    def cell(r: dict) -> str:
        if r.get("difference") is None:
            return "— | — | — |"
        lo, hi = r["ci95"] if r.get("ci95") else (math.nan, math.nan)
        interval = f" [{lo:+.3f}, {hi:+.3f}]" if math.isfinite(lo) and math.isfinite(hi) else ""
        return f"{r['loss_a']:.3f} | {r['loss_b']:.3f} | {r['difference']:+.3f}{interval} |"

    rows = [{**gap["total"], "class": "all", "tokens": text["tokens"]}, *gap["groups"]]
    names = {"all": "all tokens", "ar_hit": "AR hits (the bigram ending here occurred earlier in the block)",
             "repeat": "other repeats", "first": "first occurrences"}
    lines = [
        "### Where the gap lives",
        "",
        f"Every seed of both architectures scored token by token (`eval.gap`) on {text['tokens']:,} {text['split']} "
        f"tokens of {text['documents']} documents, blocks of {text.get('block_size', '?')} as train.py cuts them; "
        f"SPEN minus the GPT-2 architecture per class (positive: SPEN worse); {gap['interval']}.",
        "",
        "| tokens | count | GPT-2 architecture | SPEN | SPEN − GPT-2 [95% CI] |",
        "|---|---:|---:|---:|---|",
        *[f"| {names.get(r['class'], r['class'])} | {r['tokens']:,} | {cell(r)}" for r in rows],
        "",
    ]
    for name, cst in gap.get("contrasts", {}).items():
        lo, hi = cst["ci95"] if cst.get("ci95") else (math.nan, math.nan)
        if cst.get("value") is not None:
            lines.append(f"- contrast `{name}` ({cst.get('means', '')}): {cst['value']:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    row = next((r for r in report.get("claims", []) if r["id"] == "gap_on_recall"), None)
    if row is not None:
        lines.append(f"- claim \"{row['sentence']}\": **{verdict_text(row)}**"
                     + (f" (precondition: {_preconditions(row)})" if row["verdict"] == Verdict.NOT_TESTABLE.value
                        else ""))
    return [*lines, "", "Reproduce:", "", "```", _shell(gap["command"]), "```", "",
            *([f"![where the gap lives]({figure_paths['gap']})", ""] if "gap" in figure_paths else [])]


def _shell(command: str) -> str:
    """A long command one flag per line (shell continuations), so that it reads and still runs as written."""
    if len(command) <= 110:
        return command
    out: list[str] = []
    for arg in shlex.split(command):
        quoted = shlex.quote(arg)
        if len(arg) > 110 and "," in arg and quoted == arg:
            # A long comma list: one item per line; a backslash-newline inside a word joins its parts unchanged.
            quoted = ",\\\n".join(arg.split(","))
        if arg.startswith("--") and out:
            out.append(" \\\n    " + quoted)
        else:
            out.append((" " if out else "") + quoted)
    return "".join(out)


def content_section(report: dict, figure_paths: dict[str, str]) -> list[str]:
    """The content side in detail (the appendix): the headline pair against the n-gram lines, where its gap
    lives, the committed ablation at several budgets, this run's ablations, then the probes (eval.probes' own
    rendering). The claims and the ladder are read at the top (:func:`content_claims_section`)."""
    c = report["content"]
    lines = [
        *_headline_pair(c, figure_paths),
        "",
        *_gap_section(report, figure_paths),
        "\"Equivalent\" appears only where the two one-sided tests pass against the margin the plan declared; a "
        "difference that is neither shown nor excluded is \"not resolved at this budget\".",
    ]
    for key, title, fig in (("ablation", "The reader ablation: swap the predictor, keep the traces",
                             "ablation_predictor"),
                            ("traces", "Does input-dependent selection move the line?", "ablation_trace")):
        a = report[key]
        r = a["regime"]
        tpp = statistics.fmean(r["tokens_per_parameter"].values())
        rates = a.get("rates")
        rate_text = (f"each arm at its own rate from the grid {', '.join(next(iter(rates.values()))['grid'])}, chosen "
                     "on the first seed's validation loss (column \"rate\"; * at the grid's edge)" if rates
                     else f"lr {r['lr']:g} (SPEN's from the grid)")
        lines += [
            "", f"## {title}", "",
            f"{r['seeds']} seeds per arm, paired by seed, {r['steps']} steps ({r['train_tokens']:,} tokens, about "
            f"{tpp:.1f} tokens per parameter), {rate_text}; each arm minus `{a['reference']}`, equivalence margin "
            f"±{a['equivalence_margin']:g} nats. The intervals are each comparison's own; the verdicts use "
            "Holm-adjusted p-values across the arms, so an interval that just excludes 0 can stay \"not resolved\".",
            "",
            f"| arm | parameters | rate | mean {a.get('scored_on', 'validation')} loss | minus reference [95% CI] | "
            "could detect | verdict |",
            "|---|---:|---:|---:|---|---:|---|",
        ]
        for arm, loss in a["final_loss"].items():
            rate = (f"{rates[arm]['chosen']:g}{'*' if rates[arm]['edge'] else ''}" if rates and arm in rates
                    else f"{r['lr']:g}")
            cmp_arm = a["comparisons"].get(arm)
            if cmp_arm is None:
                lines.append(f"| `{arm}` (reference) | {r['parameters'][arm]:,} | {rate} | {loss:.4f} | — | — | — |")
                continue
            lo, hi = cmp_arm["ci95"]
            lines.append(f"| `{arm}` | {r['parameters'][arm]:,} | {rate} | {loss:.4f} | {cmp_arm['difference']:+.4f} "
                         f"[{lo:+.4f}, {hi:+.4f}] | {cmp_arm['detectable']:.3f} | {cmp_arm['conclusion']} |")
        lines += ["", a["statement"] + "."]
        if a.get("budgets"):
            lines += ["", *budget_table(a)]
        if fig in figure_paths:
            lines += ["", f"![{fig}]({figure_paths[fig]})"]
    lines += [
        "",
        "## Content probes: what the state keeps of which tokens it saw",
        "",
        INVERTIBILITY[0].upper() + INVERTIBILITY[1:] + ".",
        "",
        *render_content_probes_markdown(report["probes"]).splitlines(),
    ]
    for name in ("identity_at_lag", "recall", "recall_state"):
        if name in figure_paths:
            lines += ["", f"![{name}]({figure_paths[name]})"]
    return lines


def budget_table(a: dict) -> list[str]:
    """An ablation at each budget of the plan: every arm's difference from the reference, with its verdict."""
    budgets = a["budgets"]
    arms = [arm for arm in a["final_loss"] if arm != a["reference"]]
    lines = [f"Each arm minus `{a['reference']}` (nats, 95% interval, verdict) at every budget; the verdict above is "
             "the longest budget's.", "",
             "| steps | tokens | " + " | ".join(f"`{arm}`" for arm in arms) + " |", "|---:|---:|" + "---|" * len(arms)]
    for steps, b in budgets.items():
        cells = []
        for arm in arms:
            c = b["comparisons"].get(arm)
            cells.append("—" if c is None else f"{c['difference']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] "
                                               f"{c['verdict']}")
        lines.append(f"| {steps} | {b['tokens']:,} | " + " | ".join(cells) + " |")
    return lines


def _claim_row(report: dict, claim_id: str) -> dict | None:
    return next((r for r in report["claims"] if r["id"] == claim_id), None)


def _verdict_line(row: dict | None) -> str:
    """The claim row's verdict with what it read and its precondition, for a section's end."""
    if row is None:
        return "The claims table of this report has no row for it."
    # The numbers, rule and preconditions are in the claim's own section: here, the verdict and a link to it.
    return (f"Claim *{short_name(row)}*: **{verdict_text(row)}**{outside_text(row)} "
            f"([its section](#{_anchor(row)})).")


def _signed(row: dict, scale: float = 1.0, digits: int = 3) -> str:
    lo, hi = (x if x is not None else math.nan for x in row["ci95"])
    return f"{scale * row['difference']:+.{digits}f} [{scale * lo:+.{digits}f}, {scale * hi:+.{digits}f}]"


def _depth_table(d: dict) -> list[str]:
    t, runs = d["table"], d["runs"]
    chance = statistics.fmean(r["token_chance"] for r in runs["add"].values())
    growth = {r: statistics.fmean(math.log(x["rms_growth"]) for x in runs[r].values()) for r in ("add", "attention")}
    rows = [("token identity at the last layer (held-out accuracy)", t["token_accuracy"], 100, 1, "%",
             f"majority token {100 * chance:.1f}%, ceiling 100%"),
            *([("the embedding (token vector), share recovered (R², clipped)", t["embedding_share"], 100, 1, "%",
                "ceiling 100%")] if "embedding_share" in t else []),
            ("earlier blocks' outputs, share recovered (mean R², clipped to [0, 1])", t["earlier_share"], 100, 1, "%",
             "ceiling 100%"),
            *[(f"block {i}'s output, share recovered", row, 100, 1, "%", "") for i, row in enumerate(t["block_share"])],
            ("final-stream RMS over the embedding's (log; the measured growth)", t["log_rms_growth"], 1, 2, "",
             f"add {math.exp(growth['add']):.1f}x, attention {math.exp(growth['attention']):.1f}x"),
            ("validation loss (nats)", t["val_loss"], 1, 3, "",
             f"Kneser-Ney bigram {d['gate']['bigram_loss']:.3f}, unigram {math.log(d['ngram']['unigram']):.3f}")]
    lines = ["| quantity | add (residual sum) | attention (selection) | attention − add [95% interval] | verdict | "
             "beside it |", "|---|---:|---:|---|---|---|"]
    for label, row, scale, digits, unit, beside in rows:
        lines.append(f"| {label} | {scale * row['add']:.{digits}f}{unit} | {scale * row['attention']:.{digits}f}{unit} "
                     f"| {_signed(row, scale, digits)} | {row['verdict']} | {beside} |")
    return lines


def escape_routes_section(report: dict, figure_paths: dict[str, str]) -> list[str]:
    """The paper's escape routes, both maps beside their claim rows: in time, the recall map on its two axes (write
    rule x state numbers per layer; the selective state against a bank of fixed rates with equal state); in depth,
    the residual sum against Attention Residuals (eval.depth, report.json's ``depth``)."""
    lines = ["## Escape routes: selection in time and in depth", "",
             "The paper's general principle: accumulation with fixed coefficients dilutes information irreversibly, "
             "along time (a fixed-rate trace) and along depth (the residual sum), and only learned, input-dependent "
             "selection escapes it: gates as in Mamba and attention over tokens in time, Attention Residuals in "
             "depth. Each route is one map and one claim row.", "", *_details(report, ESCAPE_CLAIMS)]
    committed = (report.get("sweeps") or {}).get("recall_map")
    if committed and (committed.get("analysis") or {}).get("rule_escape"):
        lines += ["### In time: the committed escape routes", "", *escape_tables(committed), ""]
    larger = (report.get("sweeps") or {}).get("recall_map_n64")
    if larger and (larger.get("analysis") or {}).get("rule_escape"):
        lines += ["### In time: the same protocol at N = 64", "",
                  "The declared protocol, unchanged, at a larger state (a condition of the row: the sweep above "
                  "decides it).", "", *escape_tables(larger), ""]
    lines += ["### In time: this run's recall map on two axes", ""]
    recall = (report.get("probes") or {}).get("recall") or {}
    described = {n: r for n, r in recall.items() if r.get("write_rule")}
    if described:
        at = max(int(n) for r in described.values() for n in r["accuracy"])
        lines += [f"Accuracy at {at} pairs by write rule and decoding-state numbers per layer (the recall map in the "
                  "appendix; "
                  "copying a context value scores " + f"{100 / at:.1f}%).", "",
                  "| write rule | models (state numbers per layer): accuracy |", "|---|---|"]
        for rule, label in WRITE_RULES.items():
            arms = sorted(((n, r) for n, r in described.items() if r["write_rule"] == rule),
                          key=lambda x: x[1].get("state_numbers") or 0)
            if arms:
                cells = "; ".join(f"`{n}` ({r['state_numbers']:,}): {pct(r['accuracy'].get(str(at), math.nan))}"
                                  if r.get("state_numbers") else f"`{n}`: {pct(r['accuracy'].get(str(at), math.nan))}"
                                  for n, r in arms)
                lines.append(f"| {label} | {cells} |")
    else:
        lines.append("This run's recall map does not describe its models by write rule and state numbers (a map "
                     "from before the two axes).")
    lines += ["", _verdict_line(_claim_row(report, "selection_escapes_recall"))]
    if "recall_state" in figure_paths:
        lines += ["", f"![recall on two axes]({figure_paths['recall_state']})"]
    lines += ["", "### In depth: the residual sum against Attention Residuals", ""]
    d = report.get("depth")
    verdicts = [_verdict_line(_claim_row(report, "depth_selection_recovers")), "",
                _verdict_line(_claim_row(report, "depth_selection_loss"))]
    sweep = (report.get("sweeps") or {}).get("depth")
    if not d and sweep:  # the committed depth sweep the plan names carries both rows
        return lines + [f"Read on the committed sweep `{sweep['source']}` (`{sweep.get('plan')}`, "
                        f"{(sweep.get('commands') or {}).get('reproduce', 'ema-boundary sweep')}): the probe part "
                        "(token identity at the last layer, each block's share, the stream's growth with depth) "
                        "needs no language-model gate; the loss part is read behind the n-gram gate. Each row's "
                        "numbers are in its claim section.", "", *verdicts]
    if not d:
        return lines + ["Not run in this plan: the plan has no `depth` section (`python -m eval.depth --config "
                        "hub_configs/spen-depth8/train.yaml` runs it alone).", "", *verdicts]
    lines += [f"A deep narrow SPEN, {d['num_layers']} blocks of width {d['hidden_size']} ({d['parameters']['add']:,} "
              f"parameters with the residual sum, {d['parameters']['attention']:,} with Attention Residuals), "
              f"{d['max_steps']} steps ({d['tokens']:,} tokens), lr {d['lr']:g}, seeds "
              f"{', '.join(map(str, d['seeds']))}: {d['design']}. Each model is probed on "
              f"{d['probe']['num_sequences']} held-out blocks of {d['probe']['seq_len']} tokens: a ridge probe "
              "from the final stream (before the final LayerNorm) to the token at each position and to what each "
              "block wrote. Differences are paired by seed with 95% t intervals (clipped to [−1, 1] for fractions); "
              f"margins declared before the run: ±{100 * d['margins']['token_accuracy']:g} points of accuracy, "
              f"±{100 * d['margins']['earlier_share']:g} points of share, ±{d['margins']['val_loss']:g} nats.", "",
              *_depth_table(d), "",
              f"Competence gate (the loss part): {'holds' if d['gate']['holds'] else '**fails**'} "
              f"({d['gate']['numbers']}). The probe part (token identity, the blocks' shares, the stream's growth) "
              "needs no language-model gate; the loss part is read only behind it: two claim rows.", "",
              _verdict_line(_claim_row(report, "depth_selection_recovers")), "",
              _verdict_line(_claim_row(report, "depth_selection_loss"))]
    if "depth" in figure_paths:
        lines += ["", f"![depth]({figure_paths['depth']})"]
    return lines


def conditions_table(block: dict) -> list[str]:
    """The paper rows across the committed grammar_probe arms: SPCN's verdict and mean in every arm."""
    rows = block["rows"]
    arms = list(next(iter(rows.values()))["arms"].items()) if rows else []
    head = [f"{a['value']:,} sent." if a["axis"] == "train_sentences" else PROTOCOL_NAMES.get(n, n) for n, a in arms]
    lines = ["### The conditions each row holds in (committed arms)", "",
             f"From `{block['source']}` (the grammar arms, `ema-boundary sweep hub_configs/sweeps/arms.yaml`, seed "
             f"{block['seed']}): the whole structure experiment at {', '.join(f'{n:,}' for n in block['sizes'])} "
             "labelled sentences per seed, and the "
             f"unseen-word protocol's 2 x 2 at {block['protocol_size']:,}; {block['seeds']} seeds per arm, "
             f"{block['seconds'] / 60:.0f} min. Each cell: SPCN's verdict (its mean).", "",
             "| row | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for row_id, r in rows.items():
        cells = []
        for name, _ in arms:
            a = r["arms"][name]
            cells.append(f"{a['verdict']} ({value_text(row_id, r['paper'], a['spcn'])})")
        lines.append(f"| {r['description']} | " + " | ".join(cells) + " |")
    return lines


def _explanation(e: dict) -> str:
    what = EXPERIMENTS[e["experiment"]].what if e["experiment"] in EXPERIMENTS else e["experiment"]
    return f" Tested explanation: {e['text']} ({what}: {e['numbers']})."


def _anchor(row: dict) -> str:
    return f"claim-{row['id']}"


def _cell(text: str) -> str:
    """Text inside a markdown table cell: no pipe, no newline."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ours_cell(row: dict) -> str:
    value = row.get("value") or ("—" if row["verdict"] == Verdict.NOT_RUN.value else row["ours"])
    if row.get("outside") and row.get("tested_at"):
        value += f" at {row['tested_at'].split(' (')[0].split(',')[0]}"  # "at 0.66M parameters"
    return value


def claims_table(report: dict, link: str = "") -> list[str]:
    """The one-screen table: one row per claim of the claims table (a claim read both by this run and by a
    committed run printed once, :func:`eval.report.claims.one_screen`), each linking to its section."""
    lines = ["| claim | paper | ours [95% interval] | verdict | details |", "|---|---|---|---|---|"]
    for row, _ in one_screen(report["claims"]):
        paper = row.get("paper_short") or row["paper"]
        where = "escape routes" if row["id"] in ESCAPE_CLAIMS else row["side"]
        # A tested explanation that undercuts the verdict travels with it (a shortcut meets the row as well).
        shortcut = any(e["experiment"].startswith("shortcuts:") for e in row["explanations"])
        lines.append(f"| {_cell(short_name(row))} | {_cell(paper)} | {_cell(_ours_cell(row))} | "
                     f"**{short_verdict(row)}**{', as do shortcuts' if shortcut else ''} | "
                     f"[{where}]({link}#{_anchor(row)}) |")
    return lines


VERDICT_KEY = ("*met* / *refuted*: the 95% interval lies on one side of the paper's value; *opposite direction* / "
               "*not reproduced*: so, but read outside the claim's own regime (the paper's model size and corpus), "
               "which it names; *not resolved*: the interval reaches both sides; *not testable*: a precondition "
               "failed (the numbers are in its section); *not run*: the plan did not run it.")
NEITHER_KEY = ("*neither escapes*: a resolved difference (or equivalence) between two arms that both stay at "
               "copying level: no arm escapes at the budget read (both numbers are in its section).")


def verdict_key(report: dict) -> str:
    """The verdict key, with the words only some reports use where a row uses them."""
    used = {r["verdict"] for r in report.get("claims", [])}
    return VERDICT_KEY + (" " + NEITHER_KEY if Verdict.NEITHER_ESCAPES.value in used else "")


def _runs(report: dict, row: dict) -> str:
    """Where a row's numbers come from: the committed run it reads, or this run's commands."""
    block = row["measurement"].split(".")[0]
    data = report.get(block)
    if block == "sweeps" and data:  # a committed sweep the plan names (eval.report.committed)
        sweep = data.get(row["measurement"].split(".")[1]) or {}
        commands = sweep.get("commands") or {}
        state = ("complete" if sweep.get("complete")
                 else f"partial, {count(sweep.get('missing', 0), 'run')} still to run")
        return (f"committed sweep `{sweep.get('source')}` ({state}; reproduce: `{commands.get('reproduce', '')}`, "
                f"summarise: `{commands.get('summarize', '')}`)")
    if block == "structure" and data:
        return "; ".join(f"`{c}`" for c in data.get("command", []))
    if block == "content" and data:
        commands = data.get("command") or []
        return (f"{len(commands)} `train.py` runs (report.json `content.command`), e.g. `{commands[0]}`"
                if commands else "report.json `content`")
    if block in ("gap", "ablation", "traces", "probes", "depth") and isinstance(data, dict) and data.get("command"):
        return f"`{data['command']}`"
    return f"report.json `{row['measurement']}`"


def claim_detail(report: dict, row: dict, also: dict | None = None) -> list[str]:
    """A claim's section: its verdict in full words, the paper's sentence and value, this run's numbers, the rule,
    the preconditions, the conditions it holds in, the other reading of the same claim, the explanations an
    experiment tested and the runs behind it; a two-column table, so that long cells stay in cells."""
    cells = [("verdict", f"**{verdict_text(row)}**{outside_text(row)}"),
             ("the paper", f"{row['sentence']}: {row['paper']}"
              + (f" (its regime: {row['regime']})" if row.get("regime") else "")),
             ("read here", row["ours"] + (f" ({row['strength']})" if row.get("strength") else "")),
             ("rule", row["rule"])]
    if row["preconditions"]:
        cells.append(("precondition", _preconditions(row)))
    if also is not None:
        cells.append(("also read", f"{_other_reading(also)}: **{verdict_text(also)}**{outside_text(also)}; the rule "
                                   f"alone reads {also['ours']}"))
    # The two readings may share their conditions (the same committed sweep), or the row's may hold the other's and
    # more (the ladder's row adds the data axis): print each text once.
    for r in (row, also):
        if r is not None and r.get("conditions") and (r is row or r["conditions"] not in (row.get("conditions") or "")):
            cells.append(("conditions", r["conditions"]))
    for e in row["explanations"]:
        cells.append(("tested explanation", _explanation(e).strip().removeprefix("Tested explanation: ")))
    cells.append(("runs", _runs(report, row) + (f"; {_runs(report, also)}" if also is not None else "")))
    return [f'<a id="{_anchor(row)}"></a>', "", f"### {short_name(row)}", "", "| | |", "|---|---|",
            *[f"| {k} | {_cell(v)} |" for k, v in cells], ""]


def _other_reading(row: dict) -> str:
    block = row["measurement"].split(".")[0]
    if block == "sweeps":
        return f"the committed sweep `{row['measurement'].split('.')[1]}`"
    return {"content": "this run's headline pair",
            "gap": "this run's headline pair (eval.gap)", "ablation": "this run's reader ablation",
            "traces": "this run's trace ablation"}.get(block, f"report.json `{row['measurement']}`")


def _details(report: dict, ids: tuple[str, ...]) -> list[str]:
    """The sections of the claims ``ids`` (each claim once, with its other reading)."""
    lines: list[str] = []
    for row, also in one_screen(report["claims"]):
        if row["id"] in ids or (also is not None and also["id"] in ids):
            lines += claim_detail(report, row, also)
    return lines


CONTENT_CLAIMS = ("perplexity_gap", "perplexity_gap_ladder", "gap_on_recall", "readers_identical",
                  "readers_identical_budgets", "selection_escapes", "selection_escapes_budgets")
ESCAPE_CLAIMS = ("selection_escapes_recall", "recall_lost", "depth_selection_recovers", "depth_selection_loss")


def content_claims_section(report: dict) -> list[str]:
    """The language-model claims at the level of the paper's rows (the committed ladder sweep's row among them)."""
    reg = report["content"]["regime"]
    return ["## Content: language modelling, the paper's rows", "",
            f"This run's headline pair has {reg['parameters']:,} parameters and trains on {reg['train_tokens']:,} "
            f"tokens ({reg['tokens_per_parameter']:.1f} per parameter): far from the paper's 130M on C4, so only the "
            "direction of a gap carries over. Where a committed run (the scale ladder, the ablation at several "
            "budgets) reads a claim that this run cannot, the claim's row is the committed run's and this run's "
            "reading is one of its conditions. The runs themselves are in the appendix.", "",
            *_details(report, CONTENT_CLAIMS)]


def structure_claims_section(report: dict) -> list[str]:
    """The structure claims at the level of the paper's rows, then where each holds across the committed arms."""
    ids = tuple(r["id"] for r in report["claims"] if r["side"] == "structure")
    lines = ["## Structure: SPCN on the grammar, the paper's rows", "",
             "Each row against the shortcuts (the majority word, a k-token window, a plain EMA of the word codes, a "
             "frozen SPCN) and the exact ceilings; every model on every split and the per-role tables are in the "
             "appendix.", "", *_details(report, ids)]
    block = structure_conditions(report)
    if block:
        lines += conditions_table(block)
    return lines


def structure_detail_section(report: dict, figure_paths: dict[str, str]) -> list[str]:
    """The structure side in detail (the appendix): grammar_probe's own rendering of its results, then its
    figures."""
    lines = render_structure_markdown(report["structure"]).splitlines()
    for key in ("structure_by_kind", "structure_per_role", "ceilings", "learning"):
        if key in figure_paths:
            lines += ["", f"![{key}]({figure_paths[key]})"]
    return lines


def _wrap(lines: list[str], width: int = 110, longest: int = 300) -> list[str]:
    """Prose lines longer than ``longest`` hard-wrapped at ``width`` (markdown renders them the same); tables,
    code blocks, headings, images and HTML are left as they are."""
    out: list[str] = []
    code = False
    for line in lines:
        if line.startswith("```"):
            code = not code
        if code or len(line) <= longest or line.lstrip().startswith(("|", "#", "![", "<")):
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip())
        bullet = line.lstrip().startswith(("- ", "* "))
        out += textwrap.wrap(line, width, initial_indent="", subsequent_indent=" " * (indent + 2 * bullet),
                             break_long_words=False, break_on_hyphens=False)
    return out


def write_index(report: dict, figure_paths: dict[str, str], path: Path) -> None:
    """index.md: the claims on one screen and the picture of the boundary; then content, escape routes and
    structure at the level of the paper's rows; then the detail as an appendix, and how to reproduce."""
    report = portable(report)  # recorded paths relative to the repository or the output folder
    env = report["environment"]
    lines = [
        "# Where fixed-decay EMA context holds, and where it fails",
        "",
        f"*EMA Is Not All You Need* (arXiv {ARXIV}), claim by claim: what the paper says, what this suite "
        f"measured, the verdict. Plan `{report['plan']['path']}`, {env['seconds'] / 60:.1f} min on {env['device']}; "
        "every number is in `report.json` with the command that reproduces it.",
        "",
        "## The claims at a glance",
        "",
        *claims_table(report),
        "",
        verdict_key(report),
        "",
        *([f"![The boundary, axis by axis]({figure_paths['boundary']})", ""] if "boundary" in figure_paths else []),
        *content_claims_section(report),
        "",
        *escape_routes_section(report, figure_paths),
        "",
        *structure_claims_section(report),
        "", "## Reproduce", "",
        "From the root of a clone (every path below is relative to it; the stages write under the output folder):",
        "", "```", report["command"], "```", "",
        "Each stage alone: the `command` entries in `report.json` (and the **runs** row of each claim above).", "",
        "# Appendix: the detail", "",
        "The question: an exponential moving average with fixed decays is the simplest recurrent context (no gates, "
        "no content-based retrieval). The paper claims it keeps temporal **structure** but destroys token "
        "**identity**, and that no reader of the traces can recover what they dropped.", "",
        *content_section(report, figure_paths),
        "",
        *structure_detail_section(report, figure_paths),
        "",
    ]
    path.write_text("\n".join(_wrap(lines)))


README_BEGIN = "<!-- results: generated by `ema-boundary readme` from docs/report/report.json; do not edit -->"
README_END = "<!-- end of results -->"


def readme_results(report: dict, index: str = "docs/report/index.md") -> str:
    """The README's results block, from a report.json alone (so the README cannot drift from the report): the
    one-screen table (each row linking to its section of ``index``), the verdict key, the committed runs the
    rows read and the picture of the boundary."""
    report = portable(report)
    env = report["environment"]
    plan = (report["plan"]["path"] or "?").split("/")[-1]
    folder = index.rsplit("/", 1)[0]
    sources = [f"{what} `{report[key]['source']}`" for key, what in (
        ("structure_conditions", "committed grammar_probe arms"),) if report.get(key)]
    sources += [f"committed sweep `{b['source']}`"
                + ("" if b.get("complete") else f" (partial: {count(b.get('missing', 0), 'run')} still to run)")
                for b in (report.get("sweeps") or {}).values()]
    lines = [
        README_BEGIN,
        f"Plan `{plan}`, {env['seconds'] / 60:.1f} min on {env['device']}. Each verdict links to its section of "
        f"[{index}]({index}): its conditions, the explanations an experiment tested and the runs behind it.",
        "",
        *claims_table(report, link=index),
        "",
        verdict_key(report),
        *(["", "The rows also read: " + "; ".join(sources) + "."] if sources else []),
        *(["", f"![The boundary, axis by axis]({folder}/{report['figures']['boundary']})"]
          if "boundary" in report.get("figures", {}) else []),
        README_END,
    ]
    return "\n".join(_wrap(lines))


def update_readme(report: dict, readme: Path) -> bool:
    """Replace the results block of ``readme``; returns whether it changed."""
    text = readme.read_text()
    try:
        head, rest = text.split(README_BEGIN, 1)
        _, tail = rest.split(README_END, 1)
    except ValueError:
        raise ValueError(f"{readme}: no results block (the lines {README_BEGIN!r} ... {README_END!r})") from None
    new = head + readme_results(report) + tail
    if new != text:
        readme.write_text(new)
    return new != text
