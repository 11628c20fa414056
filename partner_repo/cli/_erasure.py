"""``partner-repo forget CORE --yes``: erase a core's memory (or its units before a date, or only its window).

Nothing is erased without ``--yes``: without it, the command counts what it would erase. The command prints
what it removed (``--json`` for scripts); run again after a failure, it finishes the erasure the failed run
left (see ``docs/erasure.md``).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

import click

from partner_repo.cli._output import ISO_DATETIME, echo_json, echo_wrapped, json_option, when
from partner_repo.cli._runtime import connection, run_async
from partner_repo.erasure import LEASE_WAIT, ErasurePreview, ErasureReport, ErasureRequest, MemoryEraser


@click.command()
@click.argument("core_id", metavar="[CORE]", required=False)
@click.option(
    "--yes", is_flag=True, help="Erase: without it, what would be erased is shown, nothing changed."
)
@click.option(
    "--before",
    type=ISO_DATETIME,
    default=None,
    help="Only the units that ended (last slice) before this date; the window and current session stay.",
)
@click.option("--window-only", is_flag=True, help="Only empty the live chat window; memory stays.")
@click.option(
    "--pending", is_flag=True, help="List unfinished erasures (every core); with --yes finish them."
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    default=LEASE_WAIT.total_seconds(),
    show_default=True,
    help="Seconds to wait for a roll of the core in progress before giving up.",
)
@json_option
@click.pass_context
def forget(
    ctx: click.Context,
    core_id: str | None,
    yes: bool,
    before: datetime | None,
    window_only: bool,
    pending: bool,
    wait: float,
    as_json: bool,
) -> None:
    """Erase a core: its window, its units and what names them (without --yes: only what it would erase).

    Also removes every listener group's progress on those units and their dead letters; listener groups then
    tell their consumers that have on_erased (ids only). Run again after a failure: it finishes what the
    failed run left. Other cores are never touched.
    """
    if pending:
        if core_id is not None or before is not None or window_only:
            raise click.UsageError("--pending takes no CORE, --before or --window-only")
    elif core_id is None:
        raise click.UsageError("give the CORE to forget (or --pending)")
    if before is not None and window_only:
        raise click.UsageError("--before and --window-only exclude each other")
    target = connection(ctx, "read" if not yes else "write")

    async def work() -> Any:
        eraser = MemoryEraser(await target.open(), lease_wait=timedelta(seconds=wait))
        if not yes and not pending:  # a preview: what --yes would erase, nothing changed
            assert core_id is not None
            return await eraser.preview(core_id, before=before, window_only=window_only)
        if pending:
            return await (eraser.finish_pending() if yes else eraser.unfinished())
        assert core_id is not None
        if window_only:
            return await eraser.clear_window(core_id)
        if before is not None:
            return await eraser.forget_before(core_id, before)
        return await eraser.forget(core_id)

    outcome = run_async(work)
    if as_json:
        echo_json(_jsonable(outcome, core_id))
    elif isinstance(outcome, int):
        echo_wrapped(f"cleared the window of core {core_id}: {outcome} message(s)")
    elif isinstance(outcome, ErasureReport):
        echo_wrapped(_describe(outcome))
    elif isinstance(outcome, ErasurePreview):
        echo_wrapped(_previewed(outcome, _what(core_id, before, window_only, pending)))
    else:
        _echo_list(outcome)


def _what(core_id: str | None, before: datetime | None, window_only: bool, pending: bool) -> str:
    if pending:
        return "finishing the unfinished erasures"
    if window_only:
        return f"the window of core {core_id!r}"
    if before is not None:
        return f"the units of core {core_id!r} that ended before {when(before)}"
    return f"core {core_id!r}"


def _previewed(preview: ErasurePreview, what: str) -> str:
    if preview.empty:
        return f"nothing to forget for {what}"
    counts = [] if preview.scope == "window" else [f"{preview.units} unit(s)", f"{preview.slices} slice(s)"]
    if preview.scope != "window":
        counts.append(f"{preview.messages} message(s) in them")
    if preview.scope != "before":
        counts.append(f"a window of {preview.window_messages} message(s)")
    if preview.scope != "window":
        entries = "entry" if preview.checkpoints == 1 else "entries"
        counts += [
            f"{preview.checkpoints} listener progress {entries}",
            f"{preview.dead_letters} dead letter(s)",
        ]
    kept = (
        f"; the current session's units stay: {', '.join(preview.kept_units)}" if preview.kept_units else ""
    )
    return f"would erase {what}: {', '.join(counts)}{kept}\nnothing was changed: add --yes to erase it"


def _describe(report: ErasureReport) -> str:
    if report.erasure_id is None:
        return f"nothing to forget for core {report.core_id}"
    what = (
        "forgot core" if report.scope == "core" else f"forgot the units before {when(report.before)} of core"
    )
    lines = [
        f"{what} {report.core_id} (erasure {report.erasure_id}{', resumed' if report.resumed else ''}): "
        f"{report.units} unit(s), {report.slices} slice(s), "
        + (f"a window of {report.window_messages} message(s), " if report.core_removed else "")
        + f"{report.checkpoints} listener progress entr{'y' if report.checkpoints == 1 else 'ies'}, "
        f"{report.dead_letters} dead letter(s)"
    ]
    if report.kept_units:
        lines.append(
            f"kept {len(report.kept_units)} unit(s) of the current session: {', '.join(report.kept_units)}"
        )
    lines.append("listener groups tell their consumers that have on_erased")
    return "\n".join(lines)


def _echo_list(outcome: list[ErasureReport] | list[ErasureRequest]) -> None:
    if not outcome:
        click.echo("no unfinished erasures")
        return
    for item in outcome:
        if isinstance(item, ErasureReport):
            echo_wrapped(_describe(item))
        else:
            scope = "core" if item.scope == "core" else f"before {when(item.before)}"
            echo_wrapped(
                f"erasure {item.erasure_id}: core {item.core_id} ({scope}), {item.state} since "
                f"{when(item.requested_at)}"
            )
    if isinstance(outcome[0], ErasureRequest):
        click.echo("finish them with: partner-repo forget --pending --yes")


def _jsonable(outcome: Any, core_id: str | None) -> Any:
    if isinstance(outcome, int):
        return {"core_id": core_id, "window_messages": outcome}
    if isinstance(outcome, list):
        return [asdict(item) for item in outcome]
    return asdict(outcome)
