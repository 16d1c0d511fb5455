"""`python -m hermes_runner.report DIR` (the address the docs name): the `hermes-report` command, commands/report.py."""

from hermes_runner.commands.report import main

raise SystemExit(main())
