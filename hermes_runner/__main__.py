"""`python -m hermes_runner ...`: the `hermes-runner` command (hermes_runner/commands/runner.py)."""

from hermes_runner.commands.runner import entry

entry()
