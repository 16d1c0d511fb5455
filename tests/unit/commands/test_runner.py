"""The command's argv before Hydra parses it (commands/runner.py)."""

from __future__ import annotations

import pytest

from hermes_runner.commands.runner import quote_unicode


@pytest.mark.parametrize(
    ("arg", "want"),
    [
        ("run_name=ünï", "run_name='ünï'"),
        ("+dataset.prompt_template=Réponds: ok", "+dataset.prompt_template='Réponds: ok'"),
        ("run_name=plain", "run_name=plain"),  # ASCII: as it is
        ("run_name='ünï'", "run_name='ünï'"),  # quoted already
        ("run_name=ä,ö", "run_name=ä,ö"),  # a sweep: the user quotes each value (the error says how)
        ("run_name=${oc.env:ü}", "run_name=${oc.env:ü}"),
        ("--multirun", "--multirun"),
        ("--config-dir=/tmp/ü", "--config-dir=/tmp/ü"),  # (a flag: argparse takes it as it is)
        ("ü=1", "ü=1"),  # an option name is ASCII: Hydra's error is told with how to quote
    ],
)
def test_a_plain_value_with_letters_outside_ascii_is_quoted_for_hydra(arg, want):
    assert quote_unicode([arg]) == [want]


def test_the_help_page_lists_the_groups_with_their_default_and_the_options():
    from hermes_runner.commands.runner import global_groups, help_groups, help_options

    groups = help_groups()
    assert "sandbox" in groups and "local*" in groups and "_schema" not in groups
    assert "experiment" in global_groups()
    lines = groups.splitlines()
    scorer = next(line for line in lines if line.split()[0] == "scorer")
    assert "scorer=match" in scorer and "experiment" not in scorer  # its own line, the simple form first
    assert scorer.index("scorer=match") < scorer.index("+scorer@scorers.NAME")
    assert any(line.strip().startswith("num_workers=") for line in help_options().splitlines())


def test_a_composition_error_is_one_line_with_the_closest_option():
    from hydra import compose, initialize_config_dir

    from hermes_runner.commands.runner import CONF_DIR, one_line
    from hermes_runner.config.root import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"), pytest.raises(Exception) as exc:
        compose(config_name="config", overrides=["sandbox.backendd=docker"])
    line = one_line(exc.value)
    assert "\n" not in line and "sandbox.backendd" in line and "did you mean backend?" in line
