"""util/gctune: a command's process collects nothing while it starts, then leaves start-up's objects out."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _in_fresh_process(code: str) -> str:
    """Run `code` in a new interpreter (the collector's state is process-wide) and return what it prints."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_nothing_is_collected_while_starting_and_start_up_is_frozen_after():
    out = _in_fresh_process(
        """
        import gc
        from hermes_runner.util import gctune

        gctune.starting()
        before = gc.get_stats()[0]["collections"]
        cycles = []
        for _ in range(50_000):  # far past the young threshold: a collection would have run
            a = []; a.append(a); cycles.append(a)
        print(gc.isenabled(), gc.get_stats()[0]["collections"] - before, gc.get_freeze_count())
        gctune.started()
        print(gc.isenabled(), gc.get_freeze_count() > 50_000, gc.get_threshold()[0])
        gctune.ended()
        print(gc.isenabled())
        """
    )
    assert out.splitlines() == ["False 0 0", f"True True {7_000}", "True"]


def test_a_process_that_did_not_start_as_a_command_is_left_alone():
    out = _in_fresh_process(
        """
        import gc
        from hermes_runner.util import gctune

        threshold = gc.get_threshold()
        gctune.started()
        print(gc.isenabled(), gc.get_freeze_count(), gc.get_threshold() == threshold)
        """
    )
    assert out == "True 0 True"
