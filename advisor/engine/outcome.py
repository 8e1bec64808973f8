"""The closed vocabularies of an evaluation: a finding's severity and a rule's outcome.

Both are `str` enums, so they compare equal to their values and serialize as those values in
the prof_rule JSON, while code that names one gets checked by mypy instead of a typo passing
silently as a new severity.
"""

from __future__ import annotations

from enum import Enum


class Severity(str, Enum):
    """How urgent a finding is, most urgent first."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    def __str__(self) -> str:
        return self.value


class Outcome(str, Enum):
    """What evaluating one rule on one profile came to."""

    FIRED = "fired"
    PASSED = "passed"
    NOT_APPLICABLE = "not_applicable"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


SEVERITIES: tuple[str, ...] = tuple(s.value for s in Severity)
"""Severity values, most urgent first (the order findings are ranked and thresholds compare)."""
