"""Old address of `python -m hermes_runner.merge`, kept for users: the code is in `hermes_runner.rundir.merge`."""

import sys

from hermes_runner.rundir.merge import main

if __name__ == "__main__":
    sys.exit(main())
