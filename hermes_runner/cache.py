"""`python -m hermes_runner.cache info|clear [--dir DIR]`: the command lives in hermes_runner/model/cache.py."""

from hermes_runner.commands.cache import main

if __name__ == "__main__":
    raise SystemExit(main())
