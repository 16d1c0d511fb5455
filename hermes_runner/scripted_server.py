"""Old address of `python -m hermes_runner.scripted_server`: the code is in `hermes_runner.testing.scripted_server`."""

from hermes_runner.testing.scripted_server import main

if __name__ == "__main__":
    main()
