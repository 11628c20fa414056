"""``partner-repo resummarize``: summarize again the slices whose summary is a placeholder.

A roll whose every summarizer attempt failed stored Partner's placeholder and marked the slice unsummarized;
this replaces the placeholder with a summary of the slice's raw messages (``RollingService.resummarize``),
only while it is still there, so any number of these may run at once, next to the services. Listener groups
then deliver each replaced slice again, as a revision. Exit 1 when some summary failed again (they stay
marked: run again later), as ``dead-letters replay`` does.
"""

from __future__ import annotations

from dataclasses import asdict

import click

from partner_repo.cli._output import echo_json, echo_wrapped, json_option, short
from partner_repo.cli._roll_idle import load_summarizer, summarizer_option
from partner_repo.cli._runtime import EXIT_NOT_FOUND, connection, run_async
from partner_repo.cli._slices import require_core
from partner_repo.rolling import (
    DEFAULT_RESUMMARIZE_LIMIT,
    ResummarizedSlice,
    ResummarizeReport,
    RollingService,
    extractive_summarizer,
)
from partner_repo.settings import load_settings


@click.command("resummarize")
@click.option(
    "--core", "core_id", default=None, metavar="ID", help="Only this core's slices [default: every core]."
)
@summarizer_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_RESUMMARIZE_LIMIT,
    show_default=True,
    help="Slices tried at most in this run (run again for the rest).",
)
@json_option
@click.pass_context
def resummarize(
    ctx: click.Context, core_id: str | None, summarizer_path: str | None, limit: int, as_json: bool
) -> None:
    """Replace placeholder summaries ("no summary, due to exception") with new summaries of their slices.

    Only slices marked unsummarized (every summarizer attempt of their roll failed) are touched, each only
    while its placeholder is still there; the summarizer gets the timeout and attempts rolls get
    (PARTNER_REPO_ROLLING_SUMMARIZE_*). Exits 1 when some summary failed again (they stay marked for the
    next run).
    """
    target = connection(ctx, "write")
    summarizer = load_summarizer(summarizer_path) if summarizer_path else extractive_summarizer
    config = load_settings().rolling_config()

    async def work() -> ResummarizeReport:
        database = await target.open()
        report = await RollingService(database, summarizer, config).resummarize(core_id, limit=limit)
        if core_id is not None and not report.slices:
            await require_core(database, core_id)  # a typo, most likely, which "0 replaced" would pass over
        return report

    report = run_async(work)
    if as_json:
        echo_json({"slices": [asdict(piece) for piece in report.slices], "more": report.more})
    else:
        for piece in report.slices:
            echo_wrapped(_line(piece))
        counts = f"{len(report.replaced)} replaced, {len(report.failed)} failed again"
        more = "; more are left: run again" if report.more else ""
        click.echo(f"{counts}, {len(report.skipped)} skipped{more}")
    if report.failed:
        raise SystemExit(EXIT_NOT_FOUND)


def _line(piece: ResummarizedSlice) -> str:
    where = f"slice {piece.slice_id} of unit {piece.unit_id} (core {piece.core_id})"
    if piece.outcome == "replaced":
        return f"replaced {where}, revision {piece.revision}: {short(piece.summary or '')}"
    return f"{piece.outcome} {where}: {piece.detail}"
