"""The peers section's result: its rows, its raw figures, and the wide table of the docs page.

The raw figures (``SectionResult.raw``) hold, per peer in table order, its versions (or why it was skipped)
and per operation and stored size its round trips, bytes and client CPU per operation, with the ratios to
partner-repo; the wide table is rendered from them alone, so it renders again from a JSON file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.common import Row, SectionResult, verdict

KEY = "peers"
TITLE = "6. Peers: per-turn write and reads vs the stores a service would pick instead"
METRICS = ("round_trips", "bytes", "cpu_ms")
TURN_TARGET_ROUND_TRIPS = 1.3
TURN_TARGET_BYTES = 3_000
TURN_TARGET = f"partner-repo: <= {TURN_TARGET_ROUND_TRIPS} rt and <= {TURN_TARGET_BYTES:,} B at every size"


def section(backend: str, raw: dict[str, Any]) -> SectionResult:
    """The result of one backend: ``raw`` holds ``peers`` (key, label, versions, skipped, operations) in
    table order, partner-repo first; this adds each peer's ratios to partner-repo and builds the rows."""
    result = SectionResult(key=KEY, title=TITLE, backend=backend, raw=raw)
    partner = raw["peers"][0]
    for peer in raw["peers"]:
        name = _name(peer, every_package=False)
        if peer["skipped"]:
            result.rows.append(Row(f"{name}: skipped", peer["skipped"]))
            continue
        peer["ratios"] = {
            operation: {
                stored: _over(figure, partner["operations"][operation][stored])
                for stored, figure in by_size.items()
            }
            for operation, by_size in peer["operations"].items()
        }
        for operation, title in raw["operation_titles"].items():
            by_size = peer["operations"][operation]
            text = "; ".join(f"{int(stored):,}: {_figure(figure)}" for stored, figure in by_size.items())
            target, passed = "", None
            if peer is partner and operation == "turn":
                target, passed = TURN_TARGET, all(_meets_turn_target(f) for f in by_size.values())
            elif peer is not partner and by_size:
                largest = max(by_size, key=int)
                ratios = peer["ratios"][operation][largest]
                text += f"; vs partner-repo at {int(largest):,}: {_ratios(ratios)}"
            result.rows.append(Row(f"{title}: {name}", text, target, passed))
    return result


def markdown_tables(results: Sequence[SectionResult], backend_name: Callable[[str], str] = str) -> str:
    """Per peers result: one row per operation and stored size, one column per peer (ratios to
    partner-repo in parentheses), then the peers' versions and the skipped peers with the reason."""
    blocks = []
    for result in results:
        if result.key != KEY:
            continue
        peers = [p for p in result.raw["peers"] if not p["skipped"]]
        lines = [
            f"{result.title} ({backend_name(result.backend)}). Per operation: round trips, BSON bytes sent "
            "and received, client CPU; in parentheses each over partner-repo's.",
            "",
            "| Operation | Stored messages | " + " | ".join(p["label"] for p in peers) + " |",
            "|---|---|" + "---|" * len(peers),
        ]
        for operation, title in result.raw["operation_titles"].items():
            for point in result.raw["points"]:
                stored = str(point["stored"])
                cells = [_cell(p, operation, stored) for p in peers]
                lines.append(f"| {title} | {point['stored']:,} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.extend(
            f"Target: {row.target}: {verdict(row.passed)}." for row in result.rows if row.passed is not None
        )
        lines.append("Versions: " + "; ".join(_name(p) for p in peers) + ".")
        lines.extend(f"Skipped {p['label']}: {p['skipped']}." for p in result.raw["peers"] if p["skipped"])
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _cell(peer: dict[str, Any], operation: str, stored: str) -> str:
    figure = peer["operations"][operation].get(stored)
    if figure is None:
        return "-"
    text = _figure(figure, " · ")
    ratios = peer.get("ratios", {}).get(operation, {}).get(stored)
    if peer["key"] != "partner-repo" and ratios is not None:
        text += " (" + " · ".join(f"{ratios[m]:.2f}x" for m in METRICS) + ")"
    return text


def _figure(figure: dict[str, Any], separator: str = ", ") -> str:
    return separator.join(
        [f"{figure['round_trips']:.2f} rt", f"{figure['bytes']:,.0f} B", f"{figure['cpu_ms']:.2f} ms"]
    )


def _over(figure: dict[str, Any], partner: dict[str, Any]) -> dict[str, float]:
    return {m: figure[m] / max(partner[m], 1e-9) for m in METRICS}


def _ratios(ratios: dict[str, float]) -> str:
    return f"{ratios['round_trips']:.2f}x rt, {ratios['bytes']:.2f}x B, {ratios['cpu_ms']:.2f}x CPU"


def _meets_turn_target(figure: dict[str, Any]) -> bool:
    return bool(figure["round_trips"] <= TURN_TARGET_ROUND_TRIPS and figure["bytes"] <= TURN_TARGET_BYTES)


def _name(peer: dict[str, Any], *, every_package: bool = True) -> str:
    """The peer's label with the versions of its packages (or of its first only)."""
    found = [f"{package} {v}" for package, v in peer["versions"].items() if v]
    shown = ", ".join(found if every_package else found[:1])
    return f"{peer['label']} ({shown})" if shown else peer["label"]
