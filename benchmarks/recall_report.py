"""The LoCoMo table, from a run's recall-locomo section: docs/benchmarks.md shows it, and ``--recall-doc
PATH`` puts it between the LoCoMo markers of that page (:func:`benchmarks.report.replace_locomo_table`:
docs/recall.md's ``## LoCoMo`` section). The evidence recall is the in-memory result's; a latency is quoted
only from the result measured on a server."""

from __future__ import annotations

from typing import Any

from benchmarks.common import SectionResult


def markdown_table(results: list[SectionResult], measured: str) -> str | None:
    """The LoCoMo table of the run, ``measured`` saying when and where (None when the run has no
    recall-locomo section that measured)."""
    found = [r for r in results if r.key == "recall-locomo" and r.raw.get("recall")]
    if not found:
        return None
    raw = found[0].raw
    categories = raw["categories"]
    recall = raw["recall"]
    first = next(iter(recall.values()))[str(raw["budgets"][0])]
    header = ["Method", "Returned messages"]
    header += [f"{name} ({first[name]['n']})" for name in categories.values()]
    header += [f"all ({first['n']})", "Target"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    modelled = raw.get("with_model") or {}
    for method, budgets in recall.items():
        for budget in raw["budgets"]:
            figures = budgets[str(budget)]
            ours = method.startswith("partner-repo")
            target = raw["targets"][str(budget)]
            verdict = ("PASS" if figures["all"] >= target else "FAIL") if raw["judged"] else "not judged"
            judged = f">= {target:g}: {verdict}" if ours else ""
            lines.append(_line(method, budget, figures, categories, ours, judged))
        if method.startswith("partner-repo") and modelled.get("recall"):
            lines.extend(_model_lines(modelled, raw["budgets"], categories))
    conversations = raw["conversations"]
    turns = sum(c["turns"] for c in conversations)
    sessions = sum(c["sessions"] for c in conversations)
    slices = sum(c["slices"] for c in conversations)
    timed = [r for r in results if r.key == "recall-locomo" and r.raw.get("recall_latency_ms")]
    if timed:
        latency = timed[0].raw["recall_latency_ms"]
        names = ", ".join(c["name"] for c in timed[0].raw["conversations"])
        speed = (
            f"Recall latency, measured on {timed[0].backend} (conversation {names}): "
            f"p50 {latency['p50']:.0f} ms, p95 {latency['p95']:.0f} ms over {latency['n']:,} recalls."
        )
    else:
        speed = "Nothing is timed in memory (the run measured no server)."
    return "\n".join(
        [
            f"Evidence recall on LoCoMo ({raw['citation']}): the share of each question's "
            "evidence turns among the messages returned, by question category (number of questions in "
            f"brackets). {len(conversations)} conversations ({', '.join(c['name'] for c in conversations)}), "
            f"{turns:,} turns in {sessions} sessions, indexed as {slices} slices; every question of "
            f"categories 1-4 that names evidence. partner-repo recall is `recall(limit={raw['limit']}, "
            "max_messages=N)` with the offline defaults (no network, no model)"
            + (
                f", and with {modelled['model']} ({modelled['licence']}; {modelled['weights']}) given to "
                "`RecallIndexer` and `MemoryRecall` as their embedder"
                if modelled.get("recall")
                else ""
            )
            + "; the baselines use the same turn texts and the same tokenizer.",
            "",
            *lines,
            "",
            f"{measured} Evidence recall measured on: {found[0].backend}. {speed} "
            "Reproduce with `python -m benchmarks --sections recall-locomo --check` (docs/benchmarks.md).",
        ]
    )


def _model_lines(modelled: dict[str, Any], budgets: list[int], categories: dict[str, str]) -> list[str]:
    """The rows of recall with the benchmark's model, judged against its own targets."""
    lines = []
    for budget in budgets:
        figures = modelled["recall"][str(budget)]
        target = modelled["targets"][str(budget)]
        chosen = modelled.get("category_targets", {}).get(str(budget), {})
        met = figures["all"] >= target and all(figures[name]["mean"] >= low for name, low in chosen.items())
        verdict = ("PASS" if met else "FAIL") if modelled.get("judged") else "not judged"
        wanted = "; ".join([f">= {target:g}", *(f"{name} >= {low:.2f}" for name, low in chosen.items())])
        method = f"partner-repo recall, {modelled['model']}"
        lines.append(_line(method, budget, figures, categories, True, f"{wanted}: {verdict}"))
    return lines


def _line(
    method: str, budget: int, figures: dict[str, Any], categories: dict[str, str], ours: bool, target: str
) -> str:
    """One row of the table: a method at a budget, by category and in all (ours in bold), and its target."""
    mean = f"{figures['all']:.3f}"
    cells = [f"**{method}**" if ours else method, str(budget)]
    cells += [f"{figures[name]['mean']:.3f}" for name in categories.values()]
    cells += [f"**{mean}**" if ours else mean, target]
    return "| " + " | ".join(cells) + " |"


__all__ = ["markdown_table"]
