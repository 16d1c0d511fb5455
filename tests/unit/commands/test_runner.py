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
