"""report.html of real runs, opened in a real headless Chromium."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

from hermes_runner.commands.report import main as report_main
from hermes_runner.report.page import build_report
from hermes_runner.report.summary import UNKNOWN_TOOLSET, Job, toolset_usage
from hermes_runner.rundir.reader import RunData
from hermes_runner.testing.scripted_server import ScriptedServer

from tests.helpers.machine import require
from tests.helpers.run import ROOT, base_overrides, compose_cfg, read_jsonl, run_cli, run_inprocess, script, write_jsonl
from tests.helpers.sample_run import MARKUP, make_run
from tests.helpers.wait import exited, wait_for

ARTIFACTS = ROOT / "test-artifacts"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def sample(_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run with every outcome (report written by the run itself)."""
    _server.reset()
    return make_run(_server, tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    require("browser")
    opts = webdriver.ChromeOptions()
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    opts.add_argument(f"--user-data-dir={profile}")
    opts.add_argument("--window-size=1400,1000")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(driver: webdriver.Chrome, path: Path) -> None:
    driver.get(path.as_uri())
    wait_for(lambda: driver.execute_script("return document.body.dataset.ready") == "1", 10, "the viewer script")
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def rows(driver: webdriver.Chrome) -> list[WebElement]:
    return [r for r in driver.find_elements(By.CSS_SELECTOR, "#traj-list tbody tr") if r.get_attribute("data-id")]


def statuses_shown(driver: webdriver.Chrome) -> list[str]:
    return [r.find_element(By.CSS_SELECTOR, ".badge").text for r in rows(driver)]


def set_statuses(driver: webdriver.Chrome, keep: set[str]) -> None:
    for box in driver.find_elements(By.CSS_SELECTOR, "#status-filter input"):
        if box.is_selected() != (box.get_attribute("value") in keep):
            box.click()


def search(driver: webdriver.Chrome, text: str) -> None:
    box = driver.find_element(By.ID, "filter-search")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    if text:
        box.send_keys(text)
    # The search is debounced: wait until the list is filtered by `text` (never searched: the box was empty).
    wait_for(lambda: (box.get_attribute("data-shown") or "") == text, 10, f"the list filtered by {text!r}")


def embedded(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


def shot(driver: webdriver.Chrome, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1400, min(height + 40, 7000))
    driver.execute_script("window.scrollTo(0, 0)")
    assert driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    return path


def test_run_writes_a_self_contained_report(sample: Path) -> None:
    page = sample / "report.html"
    html = page.read_text()
    assert "<svg" in html and "report-data" in html
    # Opens offline: nothing is fetched from anywhere.
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    # The model's output is data, never markup of the page.
    assert MARKUP not in html


def test_report_in_chromium_plots_filters_and_trajectories(sample: Path, browser: webdriver.Chrome) -> None:
    stats = json.loads((sample / "statistics.json").read_text())
    open_page(browser, sample / "report.html")
    assert not browser.find_elements(By.ID, "live-banner")

    # Summary cards show the run's own numbers.
    cards = {
        c.find_element(By.CLASS_NAME, "card-title").text.lower(): c.text
        for c in browser.find_elements(By.CSS_SELECTOR, ".job:not([hidden]) .card")
    }
    assert f"{stats['prompts']['ok']} (" in cards["kept"]
    assert str(stats["prompts"]["failed"]) in cards["failed"] and "ModelCallError" in cards["failed"]
    assert "no_reasoning" in cards["discarded"] and "hallucinated_tool" in cards["discarded"]
    assert f"{stats['usage']['total_tokens']:,}" in cards["tokens"]

    # Plots render: every chart has a visible size and bars with a width.
    figures = browser.find_elements(By.CSS_SELECTOR, ".job:not([hidden]) figure.chart-box")
    titles = [f.find_element(By.TAG_NAME, "figcaption").text for f in figures]
    for wanted in (
        "Outcomes",
        "Tool calls and success rate per tool",
        "Assistant turns per trajectory",
        "API calls per prompt",
        "Toolsets: sampled vs. used",
        "Reasoning coverage",
    ):
        assert wanted in titles
    for fig in figures:
        svg = fig.find_element(By.CSS_SELECTOR, "svg.chart")
        assert svg.size["width"] > 300 and svg.size["height"] > 40, fig.text
        bars = [b for b in svg.find_elements(By.CSS_SELECTOR, "rect.bar") if float(b.get_attribute("width")) > 0]
        assert bars, f"no bar drawn in {fig.text.splitlines()[0]}"
    tool_chart = figures[titles.index("Tool calls and success rate per tool")]
    assert "terminal" in tool_chart.text and "% ok" in tool_chart.text

    # Filters: status, tool, text search.
    total = stats["prompts"]["total"]
    assert len(rows(browser)) == total
    set_statuses(browser, {"failed"})
    assert statuses_shown(browser) == ["failed"] * stats["prompts"]["failed"]
    set_statuses(browser, {"completed", "partial", "discarded", "failed"})
    Select(browser.find_element(By.ID, "filter-tool")).select_by_value("read_file")
    assert len(rows(browser)) == 3 and all("read_file" in r.text for r in rows(browser))
    Select(browser.find_element(By.ID, "filter-tool")).select_by_value("")
    search(browser, "search the web")
    assert statuses_shown(browser) == ["discarded"] * 3
    search(browser, "no such text anywhere")
    assert not rows(browser) and "No trajectory matches" in browser.find_element(By.ID, "traj-list").text
    search(browser, "write notes")
    assert len(rows(browser)) == 3

    # Opening a trajectory: the conversation, reasoning folded, tool calls and results, errors marked.
    rows(browser)[0].click()
    detail = browser.find_element(By.ID, "traj-detail")
    kinds = [m.get_attribute("class") for m in detail.find_elements(By.CSS_SELECTOR, ".msg")]
    assert kinds[0] == "msg user" and "msg assistant" in kinds and "msg tool" in kinds
    reasoning = detail.find_element(By.CSS_SELECTOR, "details.reasoning")
    assert reasoning.get_attribute("open") is None
    assert not reasoning.find_element(By.CSS_SELECTOR, ".text").is_displayed()
    reasoning.find_element(By.TAG_NAME, "summary").click()
    assert reasoning.find_element(By.CSS_SELECTOR, ".text").text == "Write then read a file."
    calls = [c.text for c in detail.find_elements(By.CSS_SELECTOR, ".call")]
    assert any("write_file" in c and "notes.txt" in c for c in calls)
    errors = detail.find_elements(By.CSS_SELECTOR, ".msg.tool.err")
    assert len(errors) == 1 and "must be a non-empty string" in errors[0].text
    assert any(f.get_attribute("textContent") == "exit 3" for f in detail.find_elements(By.CSS_SELECTOR, ".flag.warn"))
    assert MARKUP in detail.text  # shown as text...
    assert browser.execute_script("return window.__pwned") is None  # ...never run
    assert browser.current_url.endswith("#t=" + rows(browser)[0].get_attribute("data-id"))
    shot(browser, "report.png")

    # A failed prompt shows its error and traceback.
    search(browser, "")
    set_statuses(browser, {"failed"})
    rows(browser)[0].click()
    err = detail.find_element(By.CSS_SELECTOR, ".msg.error")
    assert "ModelCallError" in err.text and "context length exceeded" in err.text
    assert "Traceback" in err.find_element(By.CSS_SELECTOR, "details pre").get_attribute("textContent")

    # A deep link opens its trajectory.
    browser.get((sample / "report.html").as_uri() + "#t=4")
    assert "prompt" in browser.find_element(By.CSS_SELECTOR, "#traj-detail h3").text


def test_sweep_report_compares_jobs(_server: ScriptedServer, tmp_path: Path, browser: webdriver.Chrome) -> None:
    _server.reset()
    ds = write_jsonl(
        tmp_path / "d.jsonl",
        [{"prompt": f"p{i}"} for i in range(4)] + [{"prompt": script({"content": "no thinking"}, text="plain")}],
    )
    sweep_dir = tmp_path / "sweep"
    res = run_cli(
        "-m",
        *base_overrides(_server, tmp_path),
        "run_name=sw",
        f"dataset_file={ds}",
        f"hydra.sweep.dir={sweep_dir}",
        "filters.require_reasoning=true,false",
    )
    assert res.returncode == 0, res.stderr
    jobs = sorted(p.parent for p in sweep_dir.rglob("ledger.jsonl"))
    assert len(jobs) == 2 and all((j / "report.html").exists() for j in jobs)
    open_page(browser, sweep_dir / "report.html")
    header = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "table.compare thead th")]
    assert header[0] == "metric" and len(header) == 3
    assert (
        "filters.require_reasoning=false" in header[1].lower() and "filters.require_reasoning=true" in header[2].lower()
    )
    kept = next(
        r
        for r in browser.find_elements(By.CSS_SELECTOR, "table.compare tbody tr")
        if r.find_element(By.TAG_NAME, "th").text == "kept"
    )
    assert kept.find_elements(By.TAG_NAME, "td")[0].text == "5" and kept.find_elements(By.TAG_NAME, "td")[1].text == "4"
    compare = browser.find_elements(By.CSS_SELECTOR, "#compare figure.chart-box")
    assert len(compare) >= 4
    for fig in compare:
        assert fig.find_elements(By.CSS_SELECTOR, "svg.chart rect.bar")
    # Per-job tabs switch the summary.
    tabs = browser.find_elements(By.CSS_SELECTOR, ".tab")
    tabs[1].click()
    visible = [j for j in browser.find_elements(By.CSS_SELECTOR, ".job") if j.is_displayed()]
    assert len(visible) == 1 and visible[0].get_attribute("data-job") == "1"
    # The viewer holds both jobs and filters by job.
    assert len(rows(browser)) == 10
    Select(browser.find_element(By.ID, "filter-job")).select_by_value("1")
    assert len(rows(browser)) == 5 and {r.find_element(By.CSS_SELECTOR, "td.job").text for r in rows(browser)} == {"#2"}
    set_statuses(browser, {"discarded"})
    assert len(rows(browser)) == 1
    shot(browser, "report-sweep.png")


def test_report_of_a_running_run(_server: ScriptedServer, tmp_path: Path) -> None:
    """The command reads a run that is still writing, without touching its files."""
    _server.reset()
    _server.hold(after=3)  # the 4th prompt's model call waits until released: the run is going while the report runs
    ds = write_jsonl(
        tmp_path / "d.jsonl",
        [{"prompt": script({"reasoning": "wait", "content": "ok"}, text=f"p{i}")} for i in range(12)],
    )
    run_dir = tmp_path / "live"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "run.py"),
            *base_overrides(_server, tmp_path),
            "run_name=live",
            f"dataset_file={ds}",
            f"hydra.run.dir={run_dir}",
            "num_workers=1",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ledger = run_dir / "ledger.jsonl"

        def three_done_one_held() -> bool:
            return ledger.exists() and len(ledger.read_bytes().splitlines()) >= 3 and _server.held > 0

        wait_for(three_done_one_held, 60, "3 prompts done and the 4th waiting", gone=exited(proc))
        before = ledger.read_bytes()
        res = subprocess.run(
            [sys.executable, "-m", "hermes_runner.report", str(run_dir)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr
        assert proc.poll() is None, "the run should still be going"
        assert ledger.read_bytes().startswith(before)
        html = (run_dir / "report.html").read_text()
        assert 'id="live-banner"' in html
        data = embedded(html)
        assert 3 <= len(data["items"]) < 12
        assert all(i["st"] == "completed" and i["msgs"] for i in data["items"])
    finally:
        _server.release()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    final = embedded((run_dir / "report.html").read_text())  # rewritten at the end of the run
    assert len(final["items"]) == 12 and 'id="live-banner"' not in (run_dir / "report.html").read_text()


def test_torn_ledger_tail_is_read_not_repaired(sample: Path, tmp_path: Path) -> None:
    run = tmp_path / "copy"
    shutil.copytree(sample, run)
    with (run / "ledger.jsonl").open("ab") as fp:
        fp.write(b'{"key": "half-written')  # a writer in the middle of a line
    size = (run / "ledger.jsonl").stat().st_size
    html = build_report(run).read_text()
    assert (run / "ledger.jsonl").stat().st_size == size
    assert len(embedded(html)["items"]) == len(read_jsonl(sample / "ledger.jsonl"))


def test_trajectory_cap_and_cut_messages(sample: Path, tmp_path: Path) -> None:
    out = build_report(sample, tmp_path / "small.html", max_trajectories=5, max_chars=100)
    html = out.read_text()
    data = embedded(html)
    assert len(data["items"]) == 5 and data["total"] == 24
    assert {i["st"] for i in data["items"]} == {"completed", "partial", "discarded", "failed"}  # rare ones kept
    assert "Showing 5 of 24 prompts" in html
    assert any("more characters not shown here" in m.get("c", "") for i in data["items"] for m in i["msgs"])
    assert len(html) < len((sample / "report.html").read_text())


def test_report_failure_is_a_warning_not_a_failed_run(server: ScriptedServer, tmp_path: Path, caplog) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "report.html").mkdir(parents=True)  # the page cannot be written over a directory
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p0"}, {"prompt": "p1"}])
    cfg = compose_cfg(base_overrides(server, tmp_path) + ["run_name=w", f"dataset_file={ds}"])
    with caplog.at_level(logging.WARNING):
        code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats and stats["prompts"]["ok"] == 2
    assert any("could not write report.html" in r.getMessage() for r in caplog.records)
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 2


def test_report_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert report_main([str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert report_main([str(tmp_path / "empty")]) == 2
    assert "holds no run" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "report.html").exists()


HOSTILE_TEXT = [
    "an HTML comment opens here <!-- and never closes",
    "a script ends early </script><script>window.__pwned = 2</script>",
    "<script>window.__pwned = 3</script><!--<script>",
]


def test_comment_and_script_text_in_trajectories_is_shown_and_inert(
    _server: ScriptedServer, tmp_path: Path, browser: webdriver.Chrome
) -> None:
    """`<!--`, `</script>` and `<script>` anywhere in a trajectory: the viewer still lists every entry."""
    _server.reset()
    rows_in = [
        {"prompt": script({"reasoning": f"thinking {t}", "content": f"answer {t}"}, text=f"case{i}x {t}")}
        for i, t in enumerate(HOSTILE_TEXT)
    ]
    ds = write_jsonl(tmp_path / "d.jsonl", [*rows_in, {"prompt": "a plain one"}])
    run_dir = tmp_path / "run"
    code, _ = run_inprocess(
        compose_cfg([*base_overrides(_server, tmp_path), "run_name=h", f"dataset_file={ds}"]), run_dir
    )
    assert code == 0
    html = (run_dir / "report.html").read_text()
    data = embedded(html)  # valid JSON as embedded
    assert html.count("</script>") == 2 and "<!--" not in html.split('id="report-data">', 1)[1]
    open_page(browser, run_dir / "report.html")
    assert len(rows(browser)) == 4
    for i, text in enumerate(HOSTILE_TEXT):
        search(browser, f"case{i}x")
        (row,) = rows(browser)
        row.click()
        detail = browser.find_element(By.ID, "traj-detail").text
        assert f"case{i}x {text}" in detail and f"answer {text}" in detail and f"thinking {text}" in detail
    assert browser.execute_script("return window.__pwned") is None
    assert data["total"] == 4


def column(driver: webdriver.Chrome, sort_key: str) -> list[str]:
    """The cells of a list column, by the `data-sort` of its header."""
    heads = driver.find_elements(By.CSS_SELECTOR, "#traj-list thead th")
    i = [h.get_attribute("data-sort") for h in heads].index(sort_key)
    return [r.find_elements(By.TAG_NAME, "td")[i].text for r in rows(driver)]


def sort_by(driver: webdriver.Chrome, sort_key: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f"#traj-list th[data-sort={sort_key}]").click()


def number(text: str) -> float:
    return float(text.replace(",", "").replace("$", "").rstrip("s") or 0)


def test_list_sorts_and_entries_show_timeline_and_raw_json(sample: Path, browser: webdriver.Chrome) -> None:
    open_page(browser, sample / "report.html")
    # Sortable by turns, tokens, time and tool errors: first click largest first, second click reverses.
    for key in ("turns", "tok", "dur", "tool_errors"):
        sort_by(browser, key)
        values = [number(v) for v in column(browser, key)]
        assert values == sorted(values, reverse=True) and values[0] > values[-1], key
        head = browser.find_element(By.CSS_SELECTOR, f"#traj-list th[data-sort={key}]")
        assert head.get_attribute("aria-sort") == "descending"
        sort_by(browser, key)
        assert [number(v) for v in column(browser, key)] == sorted(values)
    sort_by(browser, "idx")
    assert [int(v) for v in column(browser, "idx")] == sorted(int(v) for v in column(browser, "idx"))
    assert "cost" not in [h.get_attribute("data-sort") for h in browser.find_elements(By.CSS_SELECTOR, "#traj-list th")]

    # The timeline of the write-notes prompt: every model call with its tokens and finish reason, every tool
    # call with its duration and exit code, in order.
    search(browser, "write notes")
    rows(browser)[0].click()
    detail = browser.find_element(By.ID, "traj-detail")
    detail.find_element(By.CSS_SELECTOR, "button.dtab[data-tab=timeline]").click()
    lines = [r.text for r in detail.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")]
    calls = [line.split()[1] for line in lines]
    assert calls == ["model", "write_file", "terminal", "model", "read_file", "model", "terminal", "model"]
    assert lines[0].endswith("tool_calls") and lines[-1].endswith("stop") and "exit 3" in lines[6]
    assert "error" in lines[2]  # the empty command
    assert all(re.search(r"\d+ / \d+", line) for line, c in zip(lines, calls, strict=True) if c == "model")
    bars = detail.find_elements(By.CSS_SELECTOR, ".tl-bar")
    assert len(bars) == 8 and all(b.size["width"] > 0 for b in bars)
    assert "4 model calls" in detail.text and "4 tool calls" in detail.text
    shot(browser, "report-timeline.png")
    # The raw JSON of the entry and its ledger record.
    detail.find_element(By.CSS_SELECTOR, "button.dtab[data-tab=raw]").click()
    raw = json.loads(detail.find_element(By.CSS_SELECTOR, "pre.raw").get_attribute("textContent"))
    assert raw["entry"]["conversations"][1]["from"] == "human" and raw["ledger record"]["status"] == "ok"
    assert raw["entry"]["metadata"]["prompt_key"] == raw["ledger record"]["key"]
    # The tab chosen stays for the next entry; a failed prompt shows its failure record, no stray null.
    search(browser, "too long")
    rows(browser)[0].click()
    raw = json.loads(detail.find_element(By.CSS_SELECTOR, "pre.raw").get_attribute("textContent"))
    assert raw["ledger record"]["status"] == "failed" and "Traceback" in raw["failure"]["traceback"]
    detail.find_element(By.CSS_SELECTOR, "button.dtab[data-tab=conversation]").click()
    assert "null" not in detail.text.split() and "undefined" not in detail.text
    detail.find_element(By.CSS_SELECTOR, "button.dtab[data-tab=timeline]").click()
    (failed_call,) = detail.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")
    assert "error: ModelCallError" in failed_call.text


def scored_copy(sample: Path, target: Path) -> Path:
    """A copy of a run whose kept entries carry a reward and scorer outputs (what a scored run writes)."""
    shutil.copytree(sample, target)
    records = read_jsonl(target / "ledger.jsonl")
    out = (target / "batch_scored.jsonl").open("wb")
    offset = 0
    for n, rec in enumerate(records):
        if rec["status"] != "ok":
            continue
        with (target / rec["file"]).open("rb") as fp:
            fp.seek(rec["offset"])
            entry = json.loads(fp.read(rec["length"]))
        entry["reward"] = n / 10
        entry["scores"] = [
            {"name": "exact_match", "value": float(n % 2), "passed": bool(n % 2), "explanation": f"checked {n}"},
            {"name": "length", "value": n, "passed": None, "explanation": ""},
        ]
        line = (json.dumps(entry) + "\n").encode()
        out.write(line)
        rec.update(file="batch_scored.jsonl", offset=offset, length=len(line))
        offset += len(line)
    out.close()
    write_jsonl(target / "ledger.jsonl", records)
    return target


def test_rewards_sort_and_scores_show(sample: Path, tmp_path: Path, browser: webdriver.Chrome) -> None:
    run = scored_copy(sample, tmp_path / "scored")
    page = build_report(run)
    open_page(browser, page)
    sort_by(browser, "reward")
    rewards = column(browser, "reward")
    kept = [number(v) for v in rewards if v != "–"]
    assert kept == sorted(kept, reverse=True) and len(kept) == 15 and rewards.count("–") == 9
    rows(browser)[0].click()
    detail = browser.find_element(By.ID, "traj-detail")
    detail.find_element(By.CSS_SELECTOR, "button.dtab[data-tab=conversation]").click()
    scores = detail.find_element(By.CSS_SELECTOR, ".scores")
    assert "exact_match" in scores.text and "length" in scores.text and f"reward {kept[0]:.3f}" in scores.text.lower()
    assert "checked" in scores.text and scores.find_elements(By.CSS_SELECTOR, ".score.passed, .score.failed")


def test_the_list_filters_by_score_and_reward(sample: Path, tmp_path: Path, browser: webdriver.Chrome) -> None:
    open_page(browser, build_report(sample))  # an unscored run: no score filter
    assert not browser.find_element(By.ID, "score-filter").is_displayed()
    open_page(browser, build_report(scored_copy(sample, tmp_path / "scored")))
    total = len(column(browser, "reward"))
    Select(browser.find_element(By.ID, "filter-score")).select_by_value("passed")  # exact_match passed: odd n
    passed = column(browser, "reward")
    assert passed and all(round(number(v) * 10) % 2 == 1 for v in passed)
    Select(browser.find_element(By.ID, "filter-score")).select_by_value("unscored")
    assert set(column(browser, "reward")) == {"–"}
    Select(browser.find_element(By.ID, "filter-score")).select_by_value("")
    browser.find_element(By.ID, "filter-reward").send_keys("1.5")
    high = column(browser, "reward")
    assert high and all(number(v) >= 1.5 for v in high) and len(high) < total


def test_toolset_usage_reads_the_tool_map_of_run_json(sample: Path, tmp_path: Path) -> None:
    # The report knows no tools: run.json says which toolset each tool is of; a run dir without it says "unknown".
    manifest = json.loads((sample / "run.json").read_text())
    assert manifest["tool_toolsets"]["terminal"] == "terminal" and manifest["tool_toolsets"]["read_file"] == "file"
    names, series = toolset_usage(Job("sample", RunData.load(sample)))
    assert "terminal" in names and series["used %"][names.index("terminal")] > 0 and UNKNOWN_TOOLSET not in names
    old = tmp_path / "old"
    shutil.copytree(sample, old)
    del manifest["tool_toolsets"]
    (old / "run.json").write_text(json.dumps(manifest))
    names, series = toolset_usage(Job("old", RunData.load(old)))
    assert series["used %"][names.index(UNKNOWN_TOOLSET)] > 0 and series["used %"][names.index("terminal")] == 0
