"""`python -m hermes_runner.export` (the address the docs name): the `hermes-export` command, commands/export.py."""

from hermes_runner.commands.export import main

if __name__ == "__main__":
    raise SystemExit(main())
