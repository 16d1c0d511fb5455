"""hermes-runner: run a tool-using agent over a prompt dataset and write trajectories.

The same app as the `hermes-runner` command (hermes_runner/commands/runner.py):
python run.py dataset_file=data/prompts.jsonl run_name=my_run model=openrouter num_workers=8
python run.py --help                    # what it does, the config groups, the options, examples
python run.py --cfg job                 # show the composed config
python run.py list_distributions=true   # show the toolset distributions
"""

from hermes_runner.commands.runner import entry  # the @hydra.main app (Hydra's bash completion greps for that word)

if __name__ == "__main__":
    entry()
