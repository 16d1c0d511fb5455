"""`python -m hermes_runner.merge` (the address the docs name): the `hermes-merge` command, commands/merge.py."""

from hermes_runner.commands.merge import main

if __name__ == "__main__":
    raise SystemExit(main())
