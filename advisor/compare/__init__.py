"""Comparison of two runs (`advisor compare`): breakdown, operators, communication, memory and
modules side by side, as compare_* tables that YAML rules evaluate."""

from advisor.compare.analysis import CompareError, CompareResult, compare
from advisor.compare.operators import CompareOptions
from advisor.compare.sides import StepError

__all__ = ["CompareError", "CompareOptions", "CompareResult", "StepError", "compare"]
