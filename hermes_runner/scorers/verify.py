"""`verify`: a shell command in the prompt's own sandbox, after the conversation and before the sandbox goes."""

from __future__ import annotations

from hermes_runner.config import ScorerConfig, ScorerKind
from hermes_runner.errors import ScoreError
from hermes_runner.scorers.base import BuiltinScorer, Job, Score
from hermes_runner.scorers.template import render
from hermes_runner.util.text import clip


class VerifyScorer(BuiltinScorer):
    kind = ScorerKind.verify
    needs_sandbox = True

    def __init__(self, name: str, cfg: ScorerConfig):
        super().__init__(name, cfg)
        self.opts = cfg.verify

    def command(self, row: dict) -> str:
        """The row's own `verify` command, else the configured template over the row."""
        own = row.get("verify")
        if isinstance(own, str) and own.strip():
            return own
        if self.opts.command:
            return render(self.opts.command, f"scorers.{self.name}.verify.command", row=row, prompt=row.get("prompt"))
        raise ScoreError("the row has no `verify` command and the scorer no verify.command template")

    async def score(self, job: Job) -> Score:
        if job.sandbox is None:
            raise ScoreError("verify runs in the prompt's own sandbox, which is gone once the prompt has ended")
        command = self.command(job.row)
        res = await job.sandbox.run(command, timeout=self.opts.timeout_s, workdir=self.opts.workdir)
        output = clip(res.output, self.opts.max_output_chars)
        value = 1.0 if res.exit_code == 0 and not res.timed_out else 0.0  # a command that timed out did not pass
        why = f"verify command exited {res.exit_code}"
        if res.timed_out:
            why = f"verify command timed out after {self.opts.timeout_s:g}s"
        return self.scored(value, why, exit_code=res.exit_code, output=output)
