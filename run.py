"""hermes-runner: run a tool-using agent over a prompt dataset and write trajectories.

python run.py dataset_file=data/prompts.jsonl run_name=my_run model=openrouter num_workers=8
python run.py --cfg job                 # show the composed config
python run.py list_distributions=true   # show the toolset distributions
"""

import hydra
from omegaconf import DictConfig

from hermes_runner.config import register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    from hermes_runner.cli import run_job

    run_job(cfg)


if __name__ == "__main__":
    main()
