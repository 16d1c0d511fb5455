"""`python -m hermes_runner.score RUN +scorer@scorers.NAME=KIND ...`: the command lives in hermes_runner/run/rescore.py."""

from hermes_runner.commands.score import main

if __name__ == "__main__":
    raise SystemExit(main())
