"""`python -m hermes_runner.report DIR` (also `hermes-report DIR`): build the report page of a run or sweep."""

import sys

from hermes_runner.report.page import main

if __name__ == "__main__":
    sys.exit(main())
