"""A click CliRunner that keeps stdout and stderr apart on every click advisor supports.

click 8.2+ always does (`result.output` holds both, `result.stdout` and `result.stderr` each
stream); click 8.1, the last release for Python 3.9, mixes stderr into stdout unless told not
to, and then has no `result.stderr`.
"""

from __future__ import annotations

import inspect

from click.testing import CliRunner


def separate_runner() -> CliRunner:
    """A runner whose results have `stdout` and `stderr` apart (not `output` with both on
    click 8.1: read `stdout` and `stderr`)."""
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:  # click < 8.2
        return CliRunner(mix_stderr=False)
    return CliRunner()
