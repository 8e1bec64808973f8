"""`python -m advisor` runs the command line."""

from advisor.cli import entry

entry()
