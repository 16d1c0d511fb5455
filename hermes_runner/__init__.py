"""hermes-runner: a Hydra-configured batch runner for tool-using LLM agents.

The map (issue 17 is moving the flat modules into these rooms; `lint-imports` checks the rule, see pyproject.toml):

    cli.py          the Hydra job: compose, run, print the plan and the summary, exit code
    run/            one invocation: prepare, drive, record, finalize (invocation), record, outputs, plan, budget,
                    progress, estimate (+ the dry run), discards
    report/         the HTML report: page, summary, plots, svg, viewer, assets/ (reads data, never code)
    executors/      local and Ray executors: base Protocols, factory in __init__, one module per backend
    agent/          the agent loop (loop), one prompt's session (session), what a worker process needs (worker)
    tools/          the tools and toolsets; tools/backends/ the services they need (fetch, browser, search, ...)
    trajectory/     the Hermes ShareGPT format: hermes (text both ways), entry, openai, export (knows no agent)
    model/          the ChatModel Protocol (base), the OpenAI client, reasoning, rate limits, local serving
    sandbox/        where tool commands run: base Protocols, factory in __init__, one module per backend
    rundir/         the run directory on disk: layout (file names), store, manifest, stats, reader, merge
    dataset.py, usage.py, util/   vocabulary: prompts, token usage and cost, JSON/console/redaction helpers
    config.py, errors.py          every config option and every exception type
    testing/        the scripted OpenAI-compatible server for tests and benches (the product never imports it)

Rule: a room imports only the rooms below it in this list's layers (cli > run | report > executors > agent >
tools | trajectory > model | sandbox | rundir > dataset | usage | util > config > errors).
"""

__version__ = "0.1.0"
