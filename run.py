"""hermes-runner: run a tool-using agent over a prompt dataset and write trajectories.

python run.py dataset_file=data/prompts.jsonl run_name=my_run model=openrouter num_workers=8
python run.py --cfg job                 # show the composed config
python run.py list_distributions=true   # show the toolset distributions
"""

import sys

import hydra
from omegaconf import DictConfig

from hermes_runner.config import register_configs

register_configs()
JOB_STARTED = False  # set once Hydra has composed a config and handed it to a job


@hydra.main(version_base="1.3", config_path="hermes_runner/conf", config_name="config")
def main(cfg: DictConfig) -> None:
    global JOB_STARTED
    JOB_STARTED = True
    from hermes_runner.cli import run_job

    run_job(cfg)


def entry() -> None:
    """`main()` with the documented exit code 2 for a command line Hydra refuses (unknown key, wrong type,
    missing config): Hydra prints its message and exits 1 before any job starts."""
    try:
        main()
    except SystemExit as exc:
        if exc.code == 1 and not JOB_STARTED:
            sys.exit(2)
        raise
    except Exception:
        if JOB_STARTED:
            raise
        import traceback

        traceback.print_exc()  # HYDRA_FULL_ERROR=1: the full trace, still exit 2
        sys.exit(2)


if __name__ == "__main__":
    entry()
