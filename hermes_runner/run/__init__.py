"""One invocation of a run: plan, budget, drive the executor, record outcomes, derive the outputs, estimate.

It returns results and prints nothing of its own (commands/ prints). It may import executors/ and everything
below; never commands/ or report/."""

from hermes_runner.run.invocation import InvocationResult, Run, Stop, execute_run

__all__ = ["InvocationResult", "Run", "Stop", "execute_run"]
