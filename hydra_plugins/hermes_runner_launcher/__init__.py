"""hermes-runner's sweep launchers where Hydra looks for launchers (only in the hydra_plugins package):
`hydra/launcher=local` and `=slurm`. The code is hermes_runner/commands/launcher.py; without the `slurm` extra
(hydra-submitit-launcher) there are none."""

from importlib.util import find_spec

if find_spec("hydra_plugins.hydra_submitit_launcher") is not None:
    from hermes_runner.commands import launcher

    class LocalLauncher(launcher.LocalLauncher):
        """Each job of a sweep in its own process on this machine (submitit)."""

    class SlurmLauncher(launcher.SlurmLauncher):
        """Each job of a sweep a task of a SLURM job array (submitit)."""
