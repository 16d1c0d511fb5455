"""util.plugins.load: a backend by its name in a family's map, or a user's class by its import path."""

from __future__ import annotations

import collections

import pytest

from hermes_runner.errors import ConfigError
from hermes_runner.executors import EXECUTORS
from hermes_runner.sandbox import BACKENDS as SANDBOXES
from hermes_runner.scorers import KINDS as SCORERS
from hermes_runner.tools.backends.search import BACKENDS as SEARCHES
from hermes_runner.util.plugins import load

MAP = {"ordered": "collections:OrderedDict"}


def test_a_name_of_the_map():
    assert load("ordered", MAP, "x.backend") is collections.OrderedDict


@pytest.mark.parametrize("path", ["collections:Counter", "collections.Counter"])
def test_a_user_class_by_its_path(path):
    assert load(path, MAP, "x.backend") is collections.Counter


def test_an_unknown_name_names_the_option_and_the_known_names():
    with pytest.raises(ConfigError, match=r"unknown x\.backend 'nope' \(known: ordered; or a class of yours"):
        load("nope", MAP, "x.backend")


@pytest.mark.parametrize("path", ["no_such_module_here:Thing", "collections:NoSuchThing", "collections.NoSuch"])
def test_a_path_that_does_not_load_is_a_config_error(path):
    with pytest.raises(ConfigError, match=rf"x\.backend='{path}' cannot be loaded"):
        load(path, MAP, "x.backend")


@pytest.mark.parametrize(
    "family", [SANDBOXES, EXECUTORS, SEARCHES, SCORERS], ids=["sandbox", "executor", "search", "scorer"]
)
def test_every_shipped_name_loads(family):
    for name in family:
        assert callable(load(name, family, "backend")), name
