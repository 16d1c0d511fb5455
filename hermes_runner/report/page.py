"""`report.html`: one self-contained page per run or sweep: summary, plots, comparison, trajectory viewer.

python -m hermes_runner.report outputs/my_run          # a run (finished or still going)
python -m hermes_runner.report outputs/my_sweep        # a multirun: its jobs side by side
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from hermes_runner.errors import NotARunDir
from hermes_runner.report import svg as svgchart
from hermes_runner.report.plots import STATUS_COLORS, comparison_charts, run_charts
from hermes_runner.report.summary import Job, compare_table, summary
from hermes_runner.report.viewer import MAX_CHARS, MAX_TRAJECTORIES, viewer_data
from hermes_runner.rundir.layout import REPORT
from hermes_runner.rundir.reader import RunData, find_runs, job_labels
from hermes_runner.rundir.store import atomic_write

log = logging.getLogger(__name__)

ASSETS = resources.files("hermes_runner.report") / "assets"


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(ASSETS)),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda v: "–" if v is None else f"{v:,}"
    env.filters["secs"] = _secs
    return env


def _secs(v: float) -> str:
    v = float(v or 0)
    if v < 120:
        return f"{v:.1f}s"
    if v < 7200:
        return f"{v / 60:.1f} min"
    return f"{v / 3600:.1f} h"


def script_json(data: object) -> str:
    """JSON safe to embed in a <script type="application/json"> element, and still valid JSON.

    `<`, `>` and `&` only occur inside strings, where their `\\u` escapes mean the same characters:
    no `</script>`, `<!--` or `<script` can end the element or switch the HTML parser's state.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.translate(_SCRIPT_SAFE)


_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def render(root: Path, jobs: list[Job], sweep: bool, max_trajectories: int, max_chars: int) -> str:
    summs = [summary(j) for j in jobs]
    data = viewer_data(jobs, max_trajectories, max_chars)
    page = {
        "title": jobs[0].run.name if not sweep else root.name,
        "root": str(root),
        "sweep": sweep,
        "live": any(sm["live"] for sm in summs),
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "jobs": [
            {
                "label": j.label,
                "tag": j.tag,
                "color": svgchart.color(i),
                "summary": sm,
                "charts": run_charts(j, sm),
                "dir": str(j.run.dir),
            }
            for i, (j, sm) in enumerate(zip(jobs, summs, strict=False))
        ],
        "compare": compare_table(summs) if sweep else [],
        "compare_charts": comparison_charts(jobs, summs) if sweep else [],
        "shown": data["shown"],
        "total": data["total"],
        "max_chars": max_chars,
        "status_colors": STATUS_COLORS,
    }
    env = _env()
    return env.get_template("report.html.j2").render(
        page=page,
        css=(ASSETS / "report.css").read_text(),
        js=(ASSETS / "report.js").read_text(),
        data=script_json(data),
    )


def build_report(
    path: Path | str,
    out: Path | str | None = None,
    max_trajectories: int = MAX_TRAJECTORIES,
    max_chars: int = MAX_CHARS,
) -> Path:
    """Write the report of a run or sweep directory; return its path."""
    root = Path(path)
    dirs = find_runs(root)
    sweep = dirs != [root]
    labels = job_labels(root, dirs) if sweep else [root.name]
    jobs = [
        Job(label, RunData.load(d), f"#{i + 1}" if sweep else "")
        for i, (label, d) in enumerate(zip(labels, dirs, strict=False))
    ]
    html = render(root, jobs, sweep, max_trajectories, max_chars)
    target = Path(out) if out else root / REPORT
    atomic_write(target, html.encode())
    return target


def write_report_quietly(path: Path | str) -> Path | None:
    """Build the report at the end of a run; a failure is a warning, never a failed run."""
    try:
        return build_report(path)
    except NotARunDir as exc:  # nothing ran yet
        log.debug("no report: %s", exc)
        return None
    except Exception as exc:  # noqa: BLE001 - the run's data is safe; only the page is missing
        why, debug = f"{type(exc).__name__}: {exc}", log.isEnabledFor(logging.DEBUG)
        log.warning("could not write %s in %s: %s", REPORT, path, why, exc_info=debug)
        return None
