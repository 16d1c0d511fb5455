"""Structured configs: the single source of truth for every option and its doc (vocabulary: imports only errors).

The YAML files under ``hermes_runner/conf/`` pick values; these dataclasses define which keys exist and their
types (a typo or a wrong type fails at composition time), one module per section with the section's value rules.
The root `RunConfig` is in `root`, not imported here (only the commands, the app and run/ read the root);
`check` runs every rule before any side effect, `convert` holds the conversions.
"""

from hermes_runner.config.agent import *  # noqa: F403
from hermes_runner.config.check import *  # noqa: F403
from hermes_runner.config.convert import *  # noqa: F403
from hermes_runner.config.data import *  # noqa: F403
from hermes_runner.config.execution import *  # noqa: F403
from hermes_runner.config.feed import *  # noqa: F403
from hermes_runner.config.model import *  # noqa: F403
from hermes_runner.config.sandbox import *  # noqa: F403
from hermes_runner.config.scorers import *  # noqa: F403
from hermes_runner.config.telemetry import *  # noqa: F403
from hermes_runner.config.tools import *  # noqa: F403

# The options that define a run's data, the one list of them: a resumed run must not change them silently
# (rundir/manifest.py), and a sweep job's directory is named by the overrides of these keys and of config
# groups only (rundir/sweep.py), so options that do not define the data (max_samples, num_workers, limits.*
# but the budget note's, executor, resume, ...) can change and the sweep resumes in the same directories.
DATA_KEYS = (
    "dataset_file", "dataset", "model.name", "model.serve.model_path", "model.temperature", "distribution", "seed", "max_turns", "max_tokens",
    "reasoning", "provider", "system_prompt", "ephemeral_system_prompt", "prefill_messages_file", "filters",
    "sandbox.backend", "sandbox.image", "shard.index", "shard.count", "output.layout", "output.final_summary",
    "max_invalid_tool_turns", "scorers", "agent", "limits.tell_agent", "limits.keep_note",
)  # fmt: skip
