"""`python -m hermes_runner.export` (kept): the export lives in hermes_runner/trajectory/export.py."""

from hermes_runner.trajectory.export import main

if __name__ == "__main__":
    raise SystemExit(main())
