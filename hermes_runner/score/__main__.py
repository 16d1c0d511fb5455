"""`python -m hermes_runner.score RUN +scorer@scorers.NAME=KIND ...`: the command lives in hermes_runner/rescore.py."""

from hermes_runner.rescore import main

if __name__ == "__main__":
    raise SystemExit(main())
