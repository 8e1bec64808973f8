"""What every command shares: printing (never a raw control character), the --debug guard
that turns any error into one line and an exit code, --debug and --severity, and the exit-code
policy. What only the commands that evaluate rules into reports share (`run`, `compare`) is in
advisor.cli.reporting, so that `rules list` or `plugins list` never import the evaluation.

Exit codes: 0 ok; 1 a finding at or above --fail-on; 2 usage error (bad option, bad rule file
given with --rules, output inside the input); 3 an input could not be read; 4 internal error
(a bug: nothing else); 5 an output could not be written (a full disk, no permission, a reader
of stdout that stopped reading: then silently, as `| head` expects).
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import click

from advisor.errors import AdvisorError, RuleError
from advisor.outputs import OutputError, is_inside
from advisor.render.format import terminal_safe

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNREADABLE, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_UNWRITABLE = 5
_DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})
"""What the system says when it cannot store what advisor writes (stdout redirected to a
full disk included): the environment's problem, never advisor's bug."""


class Failure(Exception):
    """Stops a command with a one-line message and an exit code (even with --debug: the
    message is the whole story)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print text that may hold strings from a profile, a file name or a rule file: control
    characters (terminal escape sequences) never reach the terminal raw."""
    click.echo(terminal_safe(text), err=err, nl=nl)


def error(message: str) -> None:
    """One line on stderr, `advisor: MESSAGE`, so it reads as advisor's and never as data."""
    echo(f"advisor: {message}", err=True)


def guard(debug: bool, body: Callable[[], int | None]) -> NoReturn:
    """Run a command body and exit with its code; turn any error into one line and an exit
    code, so no traceback reaches the user unless --debug asks for it."""
    try:
        code = body()
    except BrokenPipeError as exc:
        if not _stdout_reader_gone():  # another pipe broke (a worker's): not the user's doing
            _internal_error(exc, debug)
        _stop_writing_stdout()  # the reader of the output stopped (`advisor rules list | head`)
        sys.exit(EXIT_UNWRITABLE)
    except Failure as exc:
        error(str(exc))
        sys.exit(exc.code)
    except OutputError as exc:  # the message is the whole story, even with --debug
        error(str(exc))
        sys.exit(EXIT_UNWRITABLE)
    except (AdvisorError, ValueError) as exc:
        if debug:
            raise
        error(str(exc))
        sys.exit(EXIT_USAGE)
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno in _DISK_ERRORS:
            error(f"{exc.filename or 'output'}: {exc.strerror}")
            sys.exit(EXIT_UNWRITABLE)
        _internal_error(exc, debug)
    sys.exit(code or EXIT_OK)


def _internal_error(exc: BaseException, debug: bool) -> NoReturn:
    """A bug: its traceback with --debug, else one line and exit 4."""
    if debug:
        raise exc
    error(f"internal error: {type(exc).__name__}: {exc} (run with --debug for details)")
    sys.exit(EXIT_INTERNAL)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it: poll reports an error
    or hang-up on its end. Where poll is missing (Windows), a broken pipe is taken to be
    stdout's, the pipe a command line writes to."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        events = poller.poll(0)
    except AttributeError:  # no select.poll
        return True
    except (OSError, ValueError):  # no file descriptor behind stdout: not a pipe to lose
        return False
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


def _stop_writing_stdout() -> None:
    """Point stdout at the null device: what is still buffered for a reader that has gone
    would otherwise fail again, loudly, when the process exits."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # no file descriptor behind stdout (a test's capture)
        pass


def stop_on_user_rule_errors(errors: Sequence[RuleError], user_paths: Sequence[Path]) -> None:
    """A broken rule the user gave (not a plugin's) stops the command with exit 2: its checks
    would silently be missing from the result."""
    if any(is_inside(Path(e.source), p) for e in errors for p in user_paths):
        raise Failure(
            "fix the rule files above (check them with `advisor rules validate`)", EXIT_USAGE
        )


debug_option = click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
severity_option = click.option(
    "--severity",
    "severities",
    multiple=True,
    metavar="ID=high|medium|low",
    help="Fix a rule's severity (repeatable), e.g. --severity STEP-001=high.",
)
