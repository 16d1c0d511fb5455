"""The console commands: argv in, the console's lines and an exit code out (the top of the house).

runner (`hermes-runner`, `python run.py`: the Hydra app) and job (the Hydra job it runs). Only this package
prints; the logic of each command lives in its room. It may import every other room but testing/.
"""
