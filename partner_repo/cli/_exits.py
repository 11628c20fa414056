"""The one rule every command follows for its exit code and what it says on stderr, written once here:
docs/cli.md's table is generated from :data:`EXIT_RULE` (``python -m partner_repo.cli.reference``) and a test
holds every command to it (tests/unit/cli/test_exit_codes.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from partner_repo.cli._runtime import EXIT_INTERRUPTED, EXIT_NOT_FOUND, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE


@dataclass(frozen=True)
class ExitCode:
    """One exit code: when a command ends with it, and what it says then."""

    code: int
    when: str
    says: str


EXIT_RULE = (
    ExitCode(
        EXIT_OK,
        "done: the command did what it was asked. A warning does not change it: an option of the URI the "
        "driver ignores, an import item skipped (reported), a filter that matches nothing (an empty answer: "
        "`dead-letters list --group g`), nothing to forget; `listen` or `roll-idle` stopped by SIGTERM (a "
        "service manager's stop)",
        "its output on stdout; log lines (`--log-level`) on stderr",
    ),
    ExitCode(
        EXIT_NOT_FOUND,
        "not found: a core, unit, slice or listener group named to look into or act on names nothing "
        "(`slices show ID`, `--core nope`, `listener status --group nope`); or the work found or left a "
        "problem: units breaking the invariants (`check`), units not repaired (`repair`), summaries or "
        "deliveries that failed again (`resummarize`, `dead-letters replay`)",
        "one line, `error: ...` (a problem found: the report on stdout)",
    ),
    ExitCode(
        EXIT_USAGE,
        "usage: an unknown command or option, a missing argument, a bad option value, setting "
        "(`PARTNER_REPO_*`) or URI, an argument that is not UTF-8, an option the install cannot serve "
        "(`listen --metrics-port` without the `metrics` extra, `mcp` without the `mcp` extra), a command "
        "that writes or runs until stopped with no database named; and a server that cannot be reached or "
        "refuses the credentials",
        "one line, `error: ...`; click's own (an unknown option, a missing argument) print the usage line "
        "first, then `Error: ...`",
    ),
    ExitCode(
        EXIT_INTERRUPTED,
        "interrupted: Ctrl-C (SIGINT; `mcp` over stdio ends at once, as the signal would end it: its client "
        "ends it cleanly by closing its stdin)",
        "one line, `interrupted`, with how far a resumable command got and what running it again does",
    ),
    ExitCode(
        EXIT_TERMINATED,
        "terminated: SIGTERM (`kill`, a service manager's stop) of a command that does not run until stopped "
        "(`listen` and `roll-idle` stop cleanly on it and exit 0)",
        "as on Ctrl-C: one line, `interrupted`, with how far a resumable command got",
    ),
)
"""Every exit code a command ends with, in order."""

ONE_LINE = (
    "Every error is one line on stderr, never a traceback, credentials masked; with `--log-format json` it "
    "is a JSON log line (`level` ERROR, `logger` `partner_repo.cli`) like every other line there."
)


def exit_code_table() -> str:
    """The rule as a Markdown table, and the sentence every error line follows."""
    rows = ["| Exit | When | On stderr |", "|---|---|---|"]
    rows += [f"| {rule.code} | {rule.when} | {rule.says} |" for rule in EXIT_RULE]
    return "\n".join(rows) + f"\n\n{ONE_LINE}\n"


__all__ = ["EXIT_RULE", "ONE_LINE", "ExitCode", "exit_code_table"]
