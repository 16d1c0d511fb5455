"""hermes-score's scorers (run/rescore.py): the overrides compose them as on the runner."""

from __future__ import annotations

import pytest

from hermes_runner.errors import ConfigError
from hermes_runner.run.rescore import scorer_configs


def test_scorer_equals_kind_and_named_scorers_compose_for_hermes_score():
    got = scorer_configs(["scorer=match", "scorer.match.mode=numeric", "+scorer@scorers.quality=judge"])
    assert list(got) == ["match", "quality"] and got["match"].match.mode.value == "numeric"
    with pytest.raises(ConfigError, match="both name a scorer"):
        scorer_configs(["scorer=judge", "+scorer@scorers.judge=judge"])
    with pytest.raises(ConfigError, match="no scorer given"):
        scorer_configs([])
