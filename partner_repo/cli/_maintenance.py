"""``partner-repo check``, ``repair`` and ``import-state DIR``: keeping memory sound and bringing it in.

``check`` exits 1 when a unit breaks an invariant or a counter of the recall index differs from what the
index holds, ``repair`` when a unit could not be repaired; both print what they found (``--json`` for
scripts), the recall index's counters after the units (:mod:`partner_repo.recall._checking`).
``import-state`` exits 0 even when it skipped items: they are reported, never fatal. All three show a
progress bar on stderr when it is a terminal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console

from partner_repo.admin import CheckReport, InvariantViolation, RepairReport, UnitChecker
from partner_repo.cli._output import console, echo_json, json_option
from partner_repo.cli._progress import counted_progress, progress_bar
from partner_repo.cli._rows import Column, Rows
from partner_repo.cli._runtime import EXIT_NOT_FOUND, connection, fail, run_async
from partner_repo.cli._slices import open_admin, require_core, usage_errors
from partner_repo.cores import DEFAULT_CORE_ID
from partner_repo.importing import ImportIssue, ImportReport, import_partner_state, state_directory_problem
from partner_repo.mongo import MongoDatabase
from partner_repo.recall import CoreIndexCheck, RecallIndexCheck

_core_option = click.option("--core", "core_id", default=None, help="Only this core's units.")


@click.command()
@_core_option
@json_option
@click.pass_context
def check(ctx: click.Context, core_id: str | None, as_json: bool) -> None:
    """Report every unit that breaks the invariants, and every recall index counter that differs from what
    the index holds (exit 1 if any)."""

    async def work() -> tuple[CheckReport, list[CoreIndexCheck]]:
        with usage_errors(), counted_progress("checking units", _check_interrupted) as progress:
            database = await open_admin(ctx)
            report = await UnitChecker(database).check(core_id, progress=progress)
            recall = await RecallIndexCheck(database).check(core_id)
        await _known_core(database, core_id, report.units_checked)
        return report, recall

    report, recall = run_async(work)
    if as_json:
        echo_json({**report.model_dump(mode="json"), "recall_index": [asdict(found) for found in recall]})
    else:
        out = console()
        if report.units:
            found = ((u.unit_id, u.core_id, v) for u in report.units for v in u.violations)
            out.print(_violations_table("units breaking the invariants", found))
        out.print(f"checked {report.units_checked} unit(s): {len(report.units)} with violations")
        for claim in report.orphan_claims:
            when = "repair releases it" if claim.releasable else "too recent: a write may be on its way"
            out.print(f"slice id {claim.slice_id!r}: claimed by unit {claim.unit_id!r}, not held ({when})")
        for foreign in report.foreign_sessions:
            out.print(
                f"core {foreign.core_id!r}: its session unit {foreign.session_id!r} belongs to core "
                f"{foreign.owner!r}, so it cannot roll (repair gives it a fresh session)"
            )
        _print_recall_index(out, recall, "check")
        if (
            any(u.repairable for u in report.units)
            or any(c.releasable for c in report.orphan_claims)
            or report.foreign_sessions
        ):
            out.print("run `partner-repo repair` to normalize them")
    if not report.ok or not all(found.ok for found in recall):
        ctx.exit(EXIT_NOT_FOUND)


@click.command()
@_core_option
@json_option
@click.pass_context
def repair(ctx: click.Context, core_id: str | None, as_json: bool) -> None:
    """Normalize every broken unit in place and set the recall index's counters from the index (exit 1 if
    some unit could not be repaired)."""
    target = connection(ctx, "write")

    async def work() -> tuple[RepairReport, list[CoreIndexCheck]]:
        with usage_errors(), progress_bar("repairing units") as progress:
            database = await target.open()
            report = await UnitChecker(database).repair(core_id, progress=progress)
            recall = await RecallIndexCheck(database).repair(core_id)
        await _known_core(database, core_id, report.units_checked)
        return report, recall

    report, recall = run_async(work)
    if as_json:
        echo_json({**report.model_dump(mode="json"), "recall_index": [asdict(found) for found in recall]})
    else:
        out = console()
        if report.repaired:
            changed = ((u.unit_id, u.core_id, c) for u in report.repaired for c in u.changes)
            out.print(_violations_table("repaired", changed, what="changes"))
        if report.failed:
            failed = [[failure.unit_id, failure.core_id or "-", failure.reason] for failure in report.failed]
            out.print(
                Rows(
                    [Column("unit", "id"), Column("core", "id"), Column("reason")],
                    failed,
                    title="not repaired",
                )
            )
        for fresh in report.fresh_sessions:
            out.print(
                f"core {fresh.core_id!r}: a fresh session (its session unit {fresh.session_id!r} "
                f"belongs to core {fresh.owner!r})"
            )
        out.print(
            f"checked {report.units_checked} unit(s): {len(report.repaired)} repaired, "
            f"{len(report.failed)} not repaired, {len(report.released_claims)} slice-id claim(s) released, "
            f"{len(report.fresh_sessions)} core(s) given a fresh session"
        )
        _print_recall_index(out, recall, "repair")
    if not report.ok:
        ctx.exit(EXIT_NOT_FOUND)


@click.command("import-state")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--core", "core_id", default=DEFAULT_CORE_ID, show_default=True, help="Core to import into.")
@click.option(
    "--as-copy",
    is_flag=True,
    help="Import a copy under new ids (for a state whose units another core already holds; without it "
    "such an import is refused before anything is written).",
)
@json_option
@click.pass_context
def import_state(ctx: click.Context, directory: Path, core_id: str, as_copy: bool, as_json: bool) -> None:
    """Import Partner's memory from its state DIRECTORY (core/memory.json, core/memory/memory-unit*.json)."""
    if not directory.is_dir():
        raise click.BadParameter(f"{directory} is not a directory", param_hint="DIRECTORY")
    if (problem := state_directory_problem(directory)) is not None:
        fail(problem)
    target = connection(ctx, "write")

    async def work() -> ImportReport:
        with usage_errors(), counted_progress("importing unit files", _import_interrupted) as progress:
            database = await target.open()
            return await import_partner_state(
                directory, database, core_id=core_id, progress=progress, as_copy=as_copy
            )

    report = run_async(work)
    if as_json:
        echo_json(report)
        return
    out = console()
    untimed = f" ({report.messages_without_time} without a time)" if report.messages_without_time else ""
    out.print(
        f"imported {report.units_imported} new unit(s), {report.messages_imported} message(s){untimed}, "
        f"{report.slices_imported} slice(s) into core {report.core_id!r}; "
        f"{report.units_unchanged} unit(s) already present"
    )
    if report.session_id is not None:
        state = "set to" if report.session_set else "left as is; memory.json names"
        out.print(f"memory session {state} {report.session_id}")
    for title, issues in (("skipped", report.skipped), ("notes", report.warnings)):
        if issues:
            out.print(_issues_table(title, issues))
    if report.unknown_keys:
        out.print(_unknown_keys_table(report.unknown_keys))


def _print_recall_index(out: Console, found: list[CoreIndexCheck], verb: str) -> None:
    """What the recall index's counters say, core by core (only the cores with something off)."""
    off = [report for report in found if not report.ok]
    done = "set again" if verb == "repair" else "differ from what the index holds"
    for report in off:
        parts = []
        if report.core is not None:
            recorded = "unreadable" if report.core.recorded is None else report.core.recorded
            parts.append(f"slice count {recorded} for {report.core.counted}")
        if report.sequence is not None:
            recorded = "unreadable" if report.sequence.recorded is None else report.sequence.recorded
            parts.append(f"last slice number {recorded} for {report.sequence.counted}")
        if report.nodes:
            parts.append(f"{len(report.nodes)} topic node count(s)")
        if report.damaged:
            parts.append(f"{len(report.damaged)} damaged topic node(s)")
        if report.unheld:
            parts.append(f"{len(report.unheld)} topic node(s) no slice holds")
        if report.orphans:
            parts.append(f"slices of {len(report.orphans)} unit(s) that are gone")
        out.print(f"recall index of core {report.core_id!r}: {', '.join(parts)} ({done})")
    slices = sum(report.slices for report in found)
    out.print(f"recall index: {len(found)} core(s), {slices} slice(s), {len(off)} with something off")
    if off and verb == "check":
        out.print("run `partner-repo repair` to set them from the index")


async def _known_core(database: MongoDatabase, core_id: str | None, units_checked: int) -> None:
    """:class:`NotFound` for a ``--core`` that names no core (no core document, no unit): a typo, most
    likely, which "checked 0 unit(s)" would pass over."""
    if core_id is not None and not units_checked:
        await require_core(database, core_id)


def _check_interrupted(done: int, total: int) -> str:
    return (
        f"checked {done} of {total} unit(s) (check only reads: nothing changed); run it again to check them "
        "all, from the start"
    )


def _import_interrupted(done: int, total: int) -> str:
    return (
        f"went through {done} of {total} unit file(s); run the same command again to continue: the units "
        "already imported are left as they are (counted as already present)"
    )


def _violations_table(
    title: str, rows: Iterable[tuple[str, str | None, InvariantViolation]], *, what: str = "violations"
) -> Rows:
    """One row per unit, its violations (or changes) a line each: ``code: detail``."""
    found: dict[tuple[str, str], list[str]] = {}
    for unit_id, core_id, violation in rows:
        found.setdefault((unit_id, core_id or "-"), []).append(f"{violation.code}: {violation.detail}")
    columns = [Column("unit", "id"), Column("core", "id"), Column(what)]
    return Rows(
        columns, [[unit, core, "\n".join(lines)] for (unit, core), lines in found.items()], title=title
    )


def _issues_table(title: str, issues: list[ImportIssue]) -> Rows:
    columns = [Column("file", "id"), Column("item", "fixed"), Column("reason")]
    rows = [[issue.file, issue.item, issue.reason] for issue in issues]
    return Rows(columns, rows, title=f"{title} ({len(issues)})")


def _unknown_keys_table(unknown: dict[str, list[str]]) -> Rows:
    rows = [[file, ", ".join(keys)] for file, keys in unknown.items()]
    title = f"unknown keys, ignored ({len(unknown)} file(s))"
    return Rows([Column("file", "id"), Column("keys")], rows, title=title)
