"""The `hermes-runner` command (also `python run.py`): the Hydra app, its help page, tab completion and exit codes.

Hydra reports an error it meets while composing the config (a bad override, an unknown key, a value of the
wrong type, a missing config) as a trace and exits 1; here those exit 2 (`ExitCode.CONFIG`) with one line.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import textwrap
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from hermes_runner.commands import refusal
from hermes_runner.config import closest
from hermes_runner.config.root import register_configs
from hermes_runner.errors import ConfigError, ExitCode, JobNotStarted
from hermes_runner.rundir import sweep
from hermes_runner.util import gctune
from hermes_runner.util.text import first_line

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
SCHEMA_SUFFIX = "_schema"  # ConfigStore names of the structured schemas: not choices a user picks
JOB_STARTED = False  # set once Hydra has composed a config and handed it to a job
SWEEP_CODES: list[int] = []  # exit codes of the sweep's jobs, as they end (the sweep exits with the worst)
_FULL_ERROR = "HYDRA_FULL_ERROR"  # "1": Hydra raises its errors instead of printing them and exiting 1
_USER_FULL_ERROR = os.environ.get(_FULL_ERROR) == "1"  # the user asked for full traces


def _defaults() -> dict[str, tuple[str, str]]:
    """group -> (default option, its comment) from the defaults list of config.yaml."""
    out = {}
    for line in (CONF_DIR / "config.yaml").read_text().splitlines():
        if m := re.match(r"\s*-\s+([a-z_]+):\s*([a-z_0-9]+)\s*(?:#\s*(.*))?$", line):
            out[m[1]] = (m[2], (m[3] or "").split(":")[0].strip())
    return out


def help_groups() -> str:
    """The config groups and their options (the default starred), without the schema entries."""
    defaults = _defaults()
    lines = []
    for group in sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and p.name != "hydra"):
        default, what = defaults.get(group, ("", "picked with +experiment=NAME (overrides everything)"))
        names = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml") if not p.stem.endswith(SCHEMA_SUFFIX))
        choices = " ".join(f"{n}*" if n == default else n for n in names)
        head = f"  {group:<13}{what}"
        lines.append(head)
        lines.extend(textwrap.wrap(choices, 100, initial_indent=" " * 15, subsequent_indent=" " * 15))
    return "\n".join(lines)


def help_options() -> str:
    """The options of config.yaml with their defaults and comments (every option of every group: `--cfg job`)."""
    lines, section = [], ""
    for line in (CONF_DIR / "config.yaml").read_text().splitlines():
        if line.startswith("hydra:"):
            break
        if m := re.match(r"([a-z_]+):\s*(?:#.*)?$", line):
            section = m[1] + "."
        elif m := re.match(r"( {2})?([a-z_]+):\s*(\S[^#]*?)?\s*#\s*(.*)$", line):
            key = (section if m[1] else "") + m[2]
            if not m[1]:
                section = ""
            if (m[3] or "").strip() not in ("", ">-"):
                option = f"{key}={m[3].strip()}"
                pad = " " * max(1, 36 - len(option))
                lines.append(f"  {option}{pad}{m[4]}" if len(option) < 36 else f"  {option}\n{' ' * 38}{m[4]}")
    return "\n".join(lines)


def global_groups() -> list[str]:
    """Config groups whose options may set any key (`# @package _global_`, e.g. experiment)."""
    return sorted(
        d.name
        for d in CONF_DIR.iterdir()
        if d.is_dir() and any(p.read_text().startswith("# @package _global_") for p in d.glob("*.yaml"))
    )


def register_resolvers() -> None:
    """The resolvers of config.yaml: the help page's lists (conf/hydra/help/hermes.yaml), sweep job dirs."""
    for name, fn in (("hr.help_groups", help_groups), ("hr.help_options", help_options)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, lambda fn=fn: fn().replace("$", "$$"))
    if not OmegaConf.has_resolver("hr.job_dir"):
        OmegaConf.register_new_resolver("hr.job_dir", lambda task: sweep.job_dirname(list(task), global_groups()))


class SweepJobs(Callback):
    """A sweep over options that define no data is refused before any job starts (its jobs would share a
    directory); each job's end is written to the sweep dir's `jobs.jsonl`."""

    def on_multirun_start(self, config: DictConfig, **kwargs: object) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from hermes_runner.commands.job import check_run_name

        parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
        swept = [o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()]
        names = [config.get("run_name")]  # (the sweep dir's, and every job's: outputs/<run_name>/...)
        for o in parsed:
            if o.get_key_element().lstrip("+~") == "run_name":
                values = o.sweep_string_iterator() if o.is_sweep_override() else [o.get_value_element_as_str()]
                names += list(values)
        try:
            check_run_name(config, names)
            sweep.check_sweep(swept, global_groups())
        except ConfigError as exc:
            raise SystemExit(refusal(exc)) from None

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: object) -> None:
        hc = job_return.hydra_cfg.hydra if job_return.hydra_cfg is not None else None
        if hc is None or hc.mode.name != "MULTIRUN":
            return
        error = None
        if job_return.status == JobStatus.COMPLETED:
            code = int(job_return._return_value or 0)
        else:
            code, error = int(ExitCode.CONFIG), one_line(job_return._return_value)
        overrides = list(job_return.overrides or [])
        sweep.record_job(Path(hc.sweep.dir), str(hc.sweep.subdir), overrides, sweep.status_of(code), code, error)
        SWEEP_CODES.append(code)  # (a launcher that runs jobs elsewhere records them itself: commands/launcher)


register_configs()
register_resolvers()


# Start-up (docs/performance.md): a listing prints without composing a config, and two of Hydra's costs that
# buy nothing here are skipped: the second composition that only looks for a `hydra.mode` no config of ours
# sets, and the config-group lists --help computes for placeholders our help page does not use.
_LISTING = re.compile(r"list_distributions=(?i:true|yes|on|1)")
_MODE_SOURCES = ("hydra.mode", "hydra/", "hydra.searchpath", "-cp", "-cd", "--config-path", "--config-dir")


def _listing(argv: list[str]) -> bool:
    """`list_distributions=true` alone: print the distributions of conf/distribution/ (no run dir, no Hydra job)."""
    if len(argv) != 1 or not _LISTING.fullmatch(argv[0]):
        return False
    from rich.console import Console

    from hermes_runner.commands.job import load_distributions
    from hermes_runner.tools import distributions

    Console(soft_wrap=True).print(distributions.describe(load_distributions()), markup=False)
    return True


def _mode_may_be_set(argv: list[str]) -> bool:
    """Whether `hydra.mode` may come from somewhere but Hydra's default (None): an override, a config of another
    search path, or a config of ours that sets it."""
    if any(a.split("=")[0].lstrip("+~").startswith(_MODE_SOURCES) for a in argv):
        return True
    return any(re.search(r"^\s*mode:\s*(RUN|MULTIRUN)\b", p.read_text(), re.M) for p in CONF_DIR.rglob("*.yaml"))


def _skip_hydra_probes() -> None:
    """Hydra composes the config twice per run (once only to read `hydra.mode`) and lists every config group for
    a help page (100 copies of the config store): both skipped where their answer is known (idempotent)."""
    from hydra._internal.hydra import Hydra

    if getattr(Hydra, "_hr_lean", False):
        return
    probe_mode, get_help = Hydra.get_mode, Hydra.get_help

    def get_mode(self: Hydra, config_name: str | None, overrides: list[str]) -> object:
        return probe_mode(self, config_name, overrides) if _mode_may_be_set(overrides + sys.argv[1:]) else None

    def lean_get_help(self: Hydra, help_cfg: DictConfig, cfg: DictConfig, *args: object, **kwargs: object) -> str:
        if "CONFIG_GROUPS" in help_cfg.template:  # (Hydra's own page, --hydra-help, lists them)
            return get_help(self, help_cfg, cfg, *args, **kwargs)
        self.format_config_groups = lambda *_, **__: ""  # (our page takes its lists from help_groups())
        try:
            return get_help(self, help_cfg, cfg, *args, **kwargs)
        finally:
            del self.format_config_groups

    Hydra.get_mode, Hydra.get_help, Hydra._hr_lean = get_mode, lean_get_help, True


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> int:
    global JOB_STARTED
    JOB_STARTED = True
    if not _USER_FULL_ERROR and HydraConfig.get().mode != RunMode.MULTIRUN:  # a run's own errors: Hydra's report
        os.environ.pop(_FULL_ERROR, None)  # (a sweep's reach entry(): a job that did not start exits 2)
    from hermes_runner.commands.job import run_job

    return run_job(cfg)  # (a sweep job's code reaches on_job_end, jobs.jsonl and the sweep's exit code)


def entry() -> None:
    """`main()` with exit code 2 and a one-line message for a config Hydra refuses, before any job starts."""
    gctune.starting()  # (until the run starts: util/gctune.py)
    try:
        _entry(sys.argv[1:])
    finally:
        gctune.ended()


_PLAIN_KEY = re.compile(r"[~+]{0,2}[A-Za-z_][A-Za-z0-9_.@/-]*")  # (not a --flag=value)
_GRAMMAR = set("'\"\\,[]{}()$")  # quoting, escapes, sweeps, lists, dicts, functions, interpolation


def quote_unicode(argv: list[str]) -> list[str]:
    """`run_name=ünï` as `run_name='ünï'`: Hydra's override grammar takes letters outside ASCII only in a quoted
    value. A value that uses the grammar (quotes, sweeps, lists, `${...}`) is left as it is."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if (
            eq
            and value
            and not value.isascii()
            and _PLAIN_KEY.fullmatch(key)
            and not _GRAMMAR.intersection(value)
            and value == value.strip()
        ):
            arg = f"{key}='{value}'"
        out.append(arg)
    return out


def _entry(argv: list[str]) -> None:
    if _listing(argv):
        return
    if (quoted := quote_unicode(argv)) != argv:
        argv = sys.argv[1:] = quoted
    _skip_hydra_probes()
    if _completion(argv):
        return
    os.environ[_FULL_ERROR] = "1"  # composition errors reach us as exceptions (unset again when the job starts)
    try:
        main()
    except SystemExit as exc:
        if exc.code == 1 and not JOB_STARTED:
            sys.exit(ExitCode.CONFIG)
        raise
    except BrokenPipeError:  # `hermes-runner --cfg job | head`: the reader has gone, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except Exception as exc:
        if JOB_STARTED and not isinstance(exc, JobNotStarted):
            raise
        if _USER_FULL_ERROR:
            traceback.print_exc()
        code = refusal(one_line(exc))
        if isinstance(exc, JobNotStarted) and exc.log_path:
            print(exc.log_tail(), file=sys.stderr)
        sys.exit(code)
    finally:
        if not _USER_FULL_ERROR:
            os.environ.pop(_FULL_ERROR, None)
    if SWEEP_CODES:  # a sweep: the worst of its jobs
        sys.exit(sweep.worst(SWEEP_CODES))


def one_line(exc: BaseException) -> str:
    """A composition error as one line: what Hydra says, the cause, and a hint for the usual mistakes."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    if isinstance(exc, JobNotStarted):
        return str(exc)
    text = str(exc)
    cause = exc.__cause__
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and (
        m := re.search(r"Key '([^']+)' not in '([^']+)'", str(cause))
    ):
        where = f"in {cause.full_key.rsplit('.', 1)[0]}" if "." in (cause.full_key or "") else "at the top level"
        return f"{cause.full_key}: no such option {where}{_closest(cause, m[1])}"
    if m := re.search(r"(Could not find '[^']+')\s+Available options in '([^']+)':\s+(.*?)\nConfig search", text, re.S):
        options = [o.strip() for o in m[3].split() if not o.strip().endswith(SCHEMA_SUFFIX)]
        return f"{m[1]}: the options of {m[2]} are {', '.join(options)}"
    first, why = first_line(exc, None), first_line(cause, None) if cause is not None else None
    text = first + (f": {why}" if why is not None and why not in first else "")
    if "~" in text and ("Lexer" in text or "parsing override" in text):
        text += " (the override grammar refuses a bare ~: write $HOME/... or quote it, key='~/...')"
    elif not text.isascii() and ("Lexer" in text or "parsing override" in text):
        text += (
            " (the override grammar takes characters outside ASCII only in quoted values: key='välue', and in a"
            " sweep each value quoted, key='ä','ö'; option names are ASCII)"
        )
    return text


def _closest(cause: BaseException, key: str) -> str:
    """`; did you mean X?` from the fields of the node the key is missing in."""
    import dataclasses

    node_type = getattr(cause, "object_type", None)
    names = [f.name for f in dataclasses.fields(node_type)] if dataclasses.is_dataclass(node_type) else []
    close = closest(key.split(".")[-1], names)
    return f"; did you mean {close}?" if close else ""


_COMPLETION_FLAGS = ("-sc", "--shell-completion")


def _completion(argv: list[str]) -> bool:
    """Hydra's bash completion, fixed for `.venv/bin/python run.py` and without schema entries.

    Hydra's script only treats the word `python` as an interpreter: for `.venv/bin/python run.py` it ran
    `.venv/bin/python -sc query=bash` (Python's -s -c: `NameError: name 'bash' is not defined`), and its
    query does not strip `.venv/bin/python run.py` from the line. Returns whether it handled argv."""
    flag = next((a for a in argv if a.split("=")[0] in _COMPLETION_FLAGS), None)
    if flag is None:
        return False
    if "COMP_LINE" in os.environ:  # a query: the line as Hydra's parser expects it (`python run.py ...`)
        line = os.environ["COMP_LINE"]
        os.environ["COMP_LINE"] = re.sub(r"^\s*\S*python[0-9.]*\s+\S+\.py\b", "python run.py", line)
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            main()
        except SystemExit as exc:
            code = exc.code or 0
    text = out.getvalue()
    if any(a.startswith("install=") for a in argv):
        text = text.replace('[ "${words[0]}" == "python" ]', '[[ "$(basename -- "${words[0]}")" == python* ]]')
    else:
        text = " ".join(w for w in text.split() if not w.endswith(SCHEMA_SUFFIX)) + "\n"
    sys.stdout.write(text)
    if code:
        sys.exit(code)
    return True
