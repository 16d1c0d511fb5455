"""`python -m hermes_runner ...`: the `hermes-runner` command (hermes_runner/app.py)."""

from hermes_runner.app import entry

entry()
