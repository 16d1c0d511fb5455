"""One invocation of a run: plan, budget, drive the executor, record outcomes, derive the outputs, estimate.

`wiring` is the composition root: it builds the parts, each from its own config sections; the whole RunConfig is
read only there and by what drives the invocation (invocation, plan, estimate, outputs' statistics, rescore).
It returns results and prints nothing of its own (commands/ prints). It may import executors/ and everything
below; never commands/ or report/."""

from hermes_runner.run.invocation import InvocationResult, Run, Stop, execute_run

__all__ = ["InvocationResult", "Run", "Stop", "execute_run"]
