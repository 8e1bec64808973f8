"""One copy of what the evaluations of many ranks record alike.

A run over many ranks keeps every rank's evaluation until its outputs are written. Most of
an evaluation is the same on every rank of a job: each rule's params, which rules did not
apply and why, and every rule's outcome. A worker's evaluation arrives unpickled, so each
rank brought its own copy of all of it: about 70 of the 100 KB the parent kept per rank of a
small trace. Sharing equal records between the ranks' evaluations keeps memory in proportion
to the distinct records, not the ranks. Nothing changes these records once a profile is
evaluated, so the ranks may share them.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeVar

from advisor.engine.evaluate import Evaluation

_T = TypeVar("_T")


class EvaluationSharing:
    """Replaces records of an evaluation by equal ones already seen in this run."""

    def __init__(self) -> None:
        self._seen: dict[Hashable, Any] = {}

    def share(self, evaluation: Evaluation) -> None:
        """Point `evaluation`'s params, outcomes and not-applicable records at the equal
        ones an earlier evaluation holds (its findings stay its own)."""
        params = {
            rule_id: self._one(("params", rule_id, repr(values)), values)
            for rule_id, values in evaluation.params.items()
        }
        # the shared params live as long as this object: their ids stand for them
        evaluation.params = self._one(
            ("params", tuple((rule_id, id(values)) for rule_id, values in params.items())),
            params,
        )
        evaluation.outcomes = self._one(
            ("outcomes", tuple(evaluation.outcomes.items())), evaluation.outcomes
        )
        evaluation.inapplicable = self._one(
            ("inapplicable", tuple(evaluation.inapplicable.items())), evaluation.inapplicable
        )
        # a rule's id stands for the rule object: the records keep their rules alive
        key = tuple((id(rule), tuple(missing)) for rule, missing in evaluation.not_applicable)
        evaluation.not_applicable = self._one(("not_applicable", key), evaluation.not_applicable)

    def _one(self, key: Hashable, value: _T) -> _T:
        """The value seen first under `key`, when it equals `value` (params are keyed by
        their repr, which tells 1 from 1.0 and True; a NaN never equals itself, so such a
        record stays unshared)."""
        first = self._seen.setdefault(key, value)
        return first if first is value or first == value else value
