"""Every exception type of the runner, and the exit codes.

Where each one goes (control flow):

    exception                      raised by                      caught by -> what happens
    ConfigError (+ForeignRunDir)   config.check, prepare, ...     commands / run.invocation -> exit 2, nothing runs
    RunDirBusy                     rundir.store lock              commands (RunDirGuard), Run.prepare -> exit 2
    StorageFull                    run.invocation (an OSError)    run.invocation -> drain, exit 5, rerun resumes
    EndpointDown (Refused, Auth)   model.client                   agent.session -> Failure; Run stops new prompts,
                                                                  exit 4; the next run retries those failures
    ModelCallError, EmptyResponse,
    MalformedReply, BrokenStream   model.client (retried first)   agent.session -> the prompt fails (ledger); while
                                                                  run.breaker is open it runs again on recovery
    ToolModelError                 agent.loop (a tool's model     agent.session -> the prompt fails (ledger)
                                   error that left the tool)
    PromptTimeout, ImageUnavailable,
    SandboxError, AgentFailed      agent.session, sandbox/,       agent.session -> the prompt fails (ledger)
                                   agent.external                 (retry.max_attempts retries these in-run, but
                                                                  ImageUnavailable and AgentFailed)
    ContainerNotRemoved            sandbox.docker (the prompt's   agent.session -> the prompt fails (ledger,
      (a SandboxError)             container's removal failed:    log), exit 1; a later run's start reaps
                                   its processes were killed)     what is left
    ToolError (+BlockedURL)        tools/                         agent.loop -> the message is the tool result
    ScoreError (and any exception  score/ (a scorer)              score.Scorers -> the score record's `error`
      of a scorer)                                                (value 0); the trajectory is kept as usual
    Refused                        tools.backends.egress,         the egress proxy, the model proxy -> an HTTP
                                   agent.external                 error reply
    NotARunDir, ExportError        rundir.reader, trajectory      commands.refusal -> one line, exit 2
      (+NotReproduced)             .export, .reproduce
    FeedError (a ConfigError)      run.feed (the Atropos API      run.invocation -> no new prompt, exit 2; what is
                                   server unreachable, refused)   recorded stays, a rerun pushes what is unpushed
    TemplateRefused                templating.render (the         dataset.mapping -> the row goes to rejected.jsonl;
                                   sandbox refused a template)    scorers -> the score record's `error`
"""

from __future__ import annotations

import errno
from enum import IntEnum
from pathlib import Path


class ExitCode(IntEnum):
    """How an invocation ends (README: exit codes; commands.job.run_job exits with it)."""

    DONE = 0
    FAILED = 1  # some prompts failed: rerun to retry them
    CONFIG = 2  # bad input or configuration: nothing was run
    BUDGET = 3  # stopped by a budget
    ENDPOINT_DOWN = 4  # the endpoint refused connections or credentials
    STORAGE = 5  # the run dir could not be written (full disk): nothing recorded is lost, rerun with room
    NOTHING_KEPT = 6  # prompts ran but every trajectory was discarded
    INTERRUPTED = 130


class RunnerError(Exception):
    """Base class of the runner's own errors."""


class ConfigError(RunnerError):
    """Bad configuration or input found before any model call; the run does not start."""


class ForeignRunDirError(ConfigError):
    """A run directory of the original Hermes batch runner that cannot be imported safely (hermes_import)."""


class FeedError(ConfigError):
    """The trainer feed cannot go on (feed=atropos: the API server is unreachable or refuses a push): the run
    stops; every prompt recorded is kept, and a rerun pushes the groups not yet acknowledged (run/feed.py)."""


class ToolError(RunnerError):
    """An expected tool failure; its message goes back to the model as the tool result."""


class BlockedURL(ToolError):
    """The URL is not one a tool may fetch (tools/backends/netguard)."""


class Refused(RunnerError):
    """The egress proxy refuses a request (tools/backends/egress); `status` is the HTTP status it answers."""

    def __init__(self, message: str, status: int = 403):
        super().__init__(message)
        self.status = status


class SandboxError(RunnerError):
    """The sandbox itself failed (could not start, died); the prompt fails."""


class ContainerNotRemoved(SandboxError):
    """A prompt's container could not be removed: its processes were killed from the host instead (the message
    says how many, and what is left); the prompt fails, so the run ends with exit code 1."""


class ModelCallError(RunnerError):
    """A model call failed for good (non-retryable status, or retries exhausted)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ToolModelError(ModelCallError):
    """A tool's own model call failed for good and the tool let it out (not a ToolError): the prompt fails, and
    `retry.on: [tool_model]` retries it."""


class EndpointDown(ModelCallError):
    """The model endpoint can serve no prompt at all: the run stops starting prompts and ends with exit code 4."""


class EndpointRefused(EndpointDown):
    """The endpoint refused the connection (nothing listens there), after a few short retries."""


class EndpointAuthError(EndpointDown):
    """The endpoint refused the credentials (HTTP 401/403)."""


# `error_type` of the failures an EndpointDown leaves in the ledger: retried by the next invocation even
# with retry_failed=false (the prompt never had a chance to run).
ENDPOINT_DOWN_ERRORS = frozenset({"EndpointRefused", "EndpointAuthError"})


class EmptyResponse(RunnerError):
    """The endpoint answered without choices; retried like a transient error."""


class MalformedReply(RunnerError):
    """A 200 reply that is not a usable completion (not JSON, not an object, `"message": null`); retried
    like a transient error, then the prompt fails (never kept as an empty trajectory)."""


class BrokenStream(RunnerError):
    """A streamed reply broke off with an error event or unreadable data; retried unless its status says not."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class PromptTimeout(RunnerError):
    """A prompt exceeded its wall-clock limit."""


class AgentFailed(RunnerError):
    """An external agent program (agent.kind=external) made no model call, or exited non-zero on its own."""


class ScriptSyntaxError(RunnerError):
    """A scripted prompt's `#script` line is not a JSON list of steps (hermes_runner.testing: the scripted
    server answers 400, the in-process ScriptedModel raises it)."""


class ImageUnavailable(RunnerError):
    """The prompt's container image could not be found or pulled; the prompt fails."""


class RunDirBusy(RunnerError):
    """Another live process holds the run directory (rundir/store's lock); the run does not start."""


class NotARunDir(RunnerError):
    """The directory holds neither a run nor a sweep of runs (the report, the export)."""


class ExportError(RunnerError):
    """The export cannot be made (missing library, no token, nothing to export)."""


class NotReproduced(ExportError):
    """`export --reproduce`: a run dir file changed since the manifest was written, or a rebuilt file differs."""


class StorageFull(RunnerError):
    """The run directory could not be written (a full disk, a quota, a file size limit, ...): the run stops
    with what it has recorded; nothing recorded is lost, and a rerun with room goes on from there."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.errno = code

    @staticmethod
    def covers(exc: BaseException) -> bool:
        """Whether `exc` says there is no room left (disk, quota or file size limit)."""
        return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

    @classmethod
    def of(cls, exc: OSError, run_dir: object) -> StorageFull:
        full = cls.covers(exc)
        what = "the disk holding it is full" if full else "it cannot be written"
        reason = exc.strerror or type(exc).__name__
        where = f" ({exc.filename})" if exc.filename else ""
        return cls(
            f"run directory {run_dir}: {what}: {reason}{where}. The run stopped; every prompt recorded so far is "
            "kept, the unfinished ones run again. Make room (or fix the directory) and run the same command again.",
            exc.errno,
        )


class TemplateRefused(RunnerError):
    """The template sandbox refused what a user-written template does (reaching Python's internals)."""


class ScoreError(RunnerError):
    """A scorer could not judge a trajectory (no target, an unreadable judge reply, ...): the score record
    keeps the message in `error` (value 0, not passed); the trajectory is kept as the filters say."""


class JobNotStarted(RunnerError):
    """A sweep job refused its config (exit 2 in a single run); raised in the job so the sweep stops, with the
    job's error and, under a launcher (submitit), the path of the job's log."""

    def __init__(self, message: str, log_path: str | None = None):
        super().__init__(message)
        self.log_path = log_path

    def __reduce__(self) -> tuple:  # pickled from a launcher's job process to the sweep
        return (type(self), (str(self), self.log_path))

    def log_tail(self, lines: int = 15) -> str:
        """The end of the job's log, indented, or why it cannot be read."""
        try:
            tail = Path(self.log_path).read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        except OSError as exc:
            return f"  (its log {self.log_path} cannot be read: {exc.strerror})"
        return f"  last lines of {self.log_path}:\n" + "\n".join(f"    {ln}" for ln in tail)


class WorkerLost(RunnerError):
    """A worker process of executor.processes died with prompts in flight: they are sent again or fail."""


class RemoteCallError(RunnerError):
    """How a model call of a worker process ended in error, as its parent's call hooks see it (the
    original exception stays in the worker): its type's name, HTTP status and Retry-After."""

    def __init__(self, error_type: str, status_code: int | None = None, retry_after: float | None = None):
        super().__init__(error_type)
        self.error_type = error_type
        self.status_code = status_code
        self.retry_after = retry_after
