"""Errors users see as one line: each names the file (or rule) and the problem."""

from __future__ import annotations

from pathlib import Path


class AdvisorError(Exception):
    """Base of every error advisor reports to the user without a traceback."""


class UnreadableInput(AdvisorError):
    """Nothing usable could be read from a path."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # crosses process boundaries
        return (type(self), (self.path, self.problem))


class RuleError(AdvisorError):
    """A rule file is invalid: bad YAML, schema violation or an unsafe expression."""

    def __init__(self, source: str | Path, rule_id: str | None, problem: str) -> None:
        self.source = str(source)
        self.rule_id = rule_id
        self.problem = problem
        where = f"{self.source} [{rule_id}]" if rule_id else self.source
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str | None, str]]:
        return (type(self), (self.source, self.rule_id, self.problem))
