"""Every YAML of every config group composes into a validated RunConfig that passes `config.check`.

One test per YAML, named by it. Group YAMLs each fill their own package, so one Hydra composition takes the
i-th YAML of every group at once (a composition costs a quarter of a second); a YAML whose row fails is
composed alone, so the failure names the YAML that is broken (or says that it breaks only beside the others).
"""

from __future__ import annotations

import functools

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from hermes_runner.config import DATA_KEYS, as_container, check, check_keys, select
from hermes_runner.config.root import RunConfig
from hermes_runner.errors import ConfigError

from tests.helpers.run import CONF

HYDRA_GROUPS = ("hydra/job_logging", "hydra/launcher")  # Hydra's own groups, under conf/hydra/
# groups the defaults list holds (`group=name`); scorer/ is tested by name (`+scorer@scorers.NAME=...`), below
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name not in ("hydra", "experiment", "scorer"))
OPTIONS = {g: sorted(y.stem for y in (CONF / g).glob("*.yaml")) for g in GROUPS}
ROWS = [
    tuple(f"{g}={names[i]}" for g, names in OPTIONS.items() if i < len(names))
    for i in range(max(len(n) for n in OPTIONS.values()))
]
EXPERIMENTS = [f"+experiment={y.stem}" for y in sorted((CONF / "experiment").glob("*.yaml"))]
SCORERS = [f"+scorer@scorers.s={y.stem}" for y in sorted((CONF / "scorer").glob("*.yaml"))]


def _compose(overrides: tuple[str, ...], hydra: bool = False) -> DictConfig:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=hydra)


def _validated(overrides: tuple[str, ...]) -> RunConfig:
    """What the CLI does before anything starts: no unknown key, every type, every value rule."""
    dcfg = _compose(overrides)
    check_keys(dcfg)
    cfg = OmegaConf.to_object(dcfg)
    assert isinstance(cfg, RunConfig)
    check(cfg)
    return cfg


@functools.cache
def _row(overrides: tuple[str, ...]) -> dict | Exception:
    """The validated RunConfig of one row as plain values, or why it failed."""
    try:
        return OmegaConf.to_container(OmegaConf.structured(_validated(overrides)), enum_to_str=True)
    except Exception as exc:  # noqa: BLE001 - told apart per YAML by the test below
        return exc


def test_every_yaml_has_a_test():
    tested = {o for row in ROWS for o in row} | set(EXPERIMENTS) | {o.replace("@scorers.s", "") for o in SCORERS}
    on_disk = {f"{y.parent.name}={y.stem}" for y in CONF.glob("*/*.yaml")}
    assert {o.lstrip("+") for o in tested} == on_disk and len(on_disk) == len(list(CONF.glob("*/*.yaml")))


@pytest.mark.parametrize("override", [o for row in ROWS for o in row])
def test_group_yaml_composes_into_a_valid_run_config(override: str):
    row = next(r for r in ROWS if override in r)
    got = _row(row)
    if isinstance(got, Exception):
        _validated((override,))  # raises if this YAML is broken on its own
        if all(not isinstance(_row((o,)), Exception) for o in row if o != override):  # else the broken one fails
            pytest.fail(f"{override} composes alone but not beside {' '.join(o for o in row if o != override)}: {got}")
        return
    group, name = override.split("=")
    own = OmegaConf.to_container(OmegaConf.load(CONF / group / f"{name}.yaml"))
    own.pop("defaults", None)
    _assert_within(own, got[group], f"{group}/{name}.yaml")


def _assert_within(own: object, composed: object, where: str) -> None:
    """The YAML's own values reached the RunConfig (interpolations aside)."""
    if isinstance(own, dict):
        for key, value in own.items():
            assert isinstance(composed, dict) and key in composed, f"{where}: {key} is missing"
            _assert_within(value, composed[key], f"{where}: {key}")
    elif not (isinstance(own, str) and (own.startswith("${") or own == "???")):  # filled in later
        assert own == composed, where


@pytest.mark.parametrize("override", EXPERIMENTS)
def test_experiment_composes_into_a_valid_run_config(override: str):
    _validated((override,))


@pytest.mark.parametrize("override", SCORERS)
def test_scorer_yaml_composes_into_a_valid_run_config(override: str):
    kind = override.rsplit("=", 1)[1]
    target = ("scorers.s._target_=tests.unit.scorers.test_scorers.dict_score",) if kind == "python" else ()  # required
    cfg = _validated((override, *target))
    assert cfg.scorers["s"].kind.value == kind


def test_scorer_equals_match_picks_one_scorer_the_hydra_way():
    """`scorer=match` (a group option as Hydra users pick one) is the same config as `+scorer@scorers.match=match`,
    comes first beside named ones (so it is the primary), and takes its options as `scorer.match.*`."""
    one = _validated(("scorer=match", "scorer.match.mode=exact"))
    named = _validated(("+scorer@scorers.match=match", "scorers.match.match.mode=exact"))
    assert one.scorer is None and list(one.scorers) == ["match"] and one.scorers["match"].match.mode.value == "exact"
    assert as_container(one) == as_container(named)  # the same run data: a resume with either spelling is the same run
    both = _validated(("scorer=judge", "+scorer@scorers.tests=verify"))
    assert list(both.scorers) == ["judge", "tests"]


def test_scorer_equals_kind_beside_a_scorer_of_that_name_is_refused():
    with pytest.raises(ConfigError, match=r"scorer=match and scorers.match both name a scorer"):
        _validated(("scorer=match", "+scorer@scorers.match=judge"))


@pytest.mark.parametrize("override", [f"{g}={y.stem}" for g in HYDRA_GROUPS for y in sorted((CONF / g).glob("*.yaml"))])
def test_hydra_group_yaml_composes(override: str):
    group, name = override.split("=")
    node = OmegaConf.select(_compose((override,), hydra=True), group.replace("/", "."))
    assert node is not None and OmegaConf.to_container(node, resolve=False)
    expected = OmegaConf.load(CONF / group / f"{name}.yaml")
    for key in ("_target_", "version"):  # the file's own identity reached the composed config
        if key in expected:
            assert node[key] == expected[key]


@pytest.mark.parametrize(
    "overrides", [*ROWS, *((e,) for e in EXPERIMENTS), ("+scorer@scorers.s=match", "+scorer@scorers.v=verify")]
)
def test_as_container_is_what_omegaconf_gives(overrides: tuple[str, ...]):
    """The run's plain config (run.json, invocations.jsonl, the redactor) is built without OmegaConf: the same values."""
    cfg = _validated(overrides)
    slow, fast = OmegaConf.structured(cfg), as_container(cfg)
    assert fast == OmegaConf.to_container(slow, enum_to_str=True)
    for key in DATA_KEYS:  # what run.json's data_config held before: a changed value would refuse a resume
        value = OmegaConf.select(slow, key)
        value = OmegaConf.to_container(value, enum_to_str=True) if OmegaConf.is_config(value) else value
        assert select(fast, key) == getattr(value, "value", value), key


@pytest.mark.parametrize("name", ["../../x", "a/b", "/tmp/abs", "..", ".", "", "  ", "a\nb", "tab\there"])
def test_a_run_name_that_is_no_plain_directory_name_is_refused(name):
    from hermes_runner.config import run_name_problem

    why = run_name_problem(name)
    assert why is not None and why.startswith("run_name"), why


@pytest.mark.parametrize("name", ["sample", "ünï", "日本語 run", "a..b", ".hidden", "x-1_2.3"])
def test_plain_run_names_pass(name):
    from hermes_runner.config import run_name_problem

    assert run_name_problem(name) is None


def test_the_rules_beside_each_section_are_run_for_every_section_below_the_root():
    from hermes_runner.config import DistributionConfig, EndpointConfig, ModelConfig, ScorerConfig, ScorerKind
    from hermes_runner.config.check import problems

    cfg = RunConfig(model=ModelConfig(name="m", base_url="u"), distribution=DistributionConfig(name="d"))
    cfg.run_name = "r"
    assert problems(cfg) == []
    cfg.limits.timeout_s, cfg.shard.index, cfg.limits.keep_note = -1, 1, True
    cfg.tools.moa.reference_models = [EndpointConfig(model="a"), EndpointConfig(model="b", max_retries=-1)]
    cfg.scorers = {"j": ScorerConfig(kind=ScorerKind.judge)}
    cfg.scorers["j"].judge.endpoint.timeout_s = 0
    assert problems(cfg) == [
        "shard.index must be in [0, shard.count), got 1/1",
        "limits.timeout_s must be > 0 (or null), not -1",
        "limits.keep_note=true keeps the budget notes of limits.tell_agent, which is false",
        "tools.moa.reference_models[1].max_retries must be >= 0, not -1",
        "scorers.j.judge.endpoint.timeout_s must be > 0, not 0",
    ]
    with pytest.raises(ConfigError, match="invalid configuration: shard.index"):
        check(cfg)


def test_an_external_agent_needs_a_command_and_a_sandbox_without_network():
    from hermes_runner.config import AgentConfig, start_problems

    assert start_problems(_validated(("agent=mini_swe_agent",)).agent, _validated(()).sandbox) == []
    external = _validated(("agent=external",))
    assert start_problems(external.agent, external.sandbox) == [
        "agent.command is required with agent.kind=external (the program to run, e.g. mini -t ...)"
    ]
    cfg = _validated(("agent=hermes_agent", "sandbox.local.network=true"))
    assert "the model proxy is its only route out" in start_problems(cfg.agent, cfg.sandbox)[0]
    cfg = _validated(("agent=hermes_agent", "sandbox=docker"))
    assert start_problems(cfg.agent, cfg.sandbox) == []
    cfg = _validated(("agent=hermes_agent", "sandbox=podman", "sandbox.docker.network_mode=bridge"))
    assert "sandbox.docker.network_mode=none" in start_problems(cfg.agent, cfg.sandbox)[0]
    cfg = _validated(("agent=mini_swe_agent", "feed=atropos"))  # its calls carry no token ids to feed
    assert "feed=atropos needs the built-in agent" in start_problems(cfg.agent, cfg.sandbox, cfg.feed.kind.value)[0]
    assert AgentConfig(env={"A;rm": "1"}).problems("agent") == [
        "agent.env: 'A;rm' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
    ]
    with pytest.raises(ConfigError, match=r"agent.command \(line 1\)"):
        _validated(("agent=external", "agent.command='{{ prompt.__class__ }}'"))
