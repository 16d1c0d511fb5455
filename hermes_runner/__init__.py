"""hermes-runner: a Hydra-configured batch runner for tool-using LLM agents.

Where things live (one room per job; the rooms are listed from the top of the house down):

    room            what is in it
    commands/       every console command and the only printing: runner (`hermes-runner`, `python run.py`: the
                    Hydra app, --help, completion), job (the Hydra job: run.execute_run, printed), score, cache,
                    export, merge, report; launcher (the sweep launchers of hydra/launcher=local|slurm, named
                    in hydra_plugins/); one error -> exit code handler (refusal, @exits) in __init__
    run/            one invocation: wiring (the composition root: the parts from the config's sections),
                    invocation (prepare, drive, finalize; execute_run), record (filters + ledger record, Recorder),
                    spend, outputs (checkpoint, trajectories, statistics), plan, budget, progress,
                    estimate (+ the dry run), discards, rescore (`hermes-score`: new scores, no agent), feed
                    (feed=atropos: scored groups to an Atropos trainer, with back-pressure, exactly once),
                    breaker (the circuit breaker: dispatch pauses while an error class spikes), watch (silent
                    sessions)
    report/         the HTML report: page, __main__, summary, plots, svg, viewer, assets/ (reads data, never code)
    executors/      keep num_workers sessions in flight: base (Executor, Work, the redispatch loop), local,
                    processes, ray; open_executor
    agent/          base (AgentBackend), loop (Agent: the built-in loop, StopReason, SessionResult), external (a
                    program in the sandbox behind the model proxy), install (agent.install), session (one prompt,
                    errors as Failures), worker
    scorers/        scorers of finished trajectories: base (Score record, Scorer Protocol, Job), verify, match,
                    judge, python; open_scorers
    tools/          base (Tool, ToolContext, @tool), catalog (the toolsets), one module per toolset,
                    distributions, image_io; backends/ the services tools need (fetch, browser, search, ...)
    trajectory/     the Hermes ShareGPT format: hermes (text both ways), entry, openai, atif (Harbor's ATIF),
                    inspect_log (Inspect AI eval logs), export (knows no agent), provenance (every exported
                    row's), reproduce (manifests, --reproduce, --to all and sweeps), tokens (output.tokens: the
                    prefix-consistency check, the rows with loss masks)
    telemetry/      OpenTelemetry GenAI spans of the sessions: Trace (no-op when off), genai (the attributes),
                    otel (the SDK's provider, traced model and sandbox; imported only when on), otlp_json (the file)
    model/          base (ChatModel, Completion, CallHook), client, stream, retry, reasoning, ratelimit, serve,
                    proxy (the recording model proxy external agents call), batch (model.batch: calls gathered
                    into provider batches; batch_journal, openai_batches)
    sandbox/        where tool commands run: base Protocols, factory in __init__, one package per backend family
                    (local/: bubblewrap, docker/: containers) and podman (Docker's backend on Podman), watchdog
    rundir/         the run directory on disk: layout (file names), store, manifest, stats, metrics (pass@k and
                    the other score estimators), reader, merge, sweep
    dataset/        rows of any format -> Prompt: base (Prompt, Reader Protocol, identity), one module per format
                    (jsonl, json_file, csv_file, parquet, hf), mapping (fields, template, messages), prefill
    usage.py        token usage and its cost
    util/           fast JSON, the console and its log handler, secret redaction, plugins (backends by name), text (clip),
                    appendlog (an append-only JSONL file)
    config/         every option, a module per section and its rules; root (RunConfig), check, convert, templating
    errors.py       every exception type and the exit codes, with the control-flow table
    conf/           the Hydra configs (shipped in the wheel): config.yaml and one folder per group
    testing/        the #script grammar (script), the scripted OpenAI-compatible server for tests and benches
                    (and its Batch API: batch_api),
                    ScriptedModel: the same script in process (model); the product never imports it
    export.py, merge.py  `python -m hermes_runner.export` / `.merge`, the addresses the docs name: commands/

Import rule (`lint-imports` checks it, contracts in pyproject.toml): a room imports only rooms on lower lines
of this stack, and rooms on one line do not import each other:

    commands > run | report > executors > agent > scorers > tools | trajectory | telemetry > model | sandbox | rundir
        > dataset | usage | util > config : errors

report/ and trajectory/ import no agent, model, tools or executors; tools/backends/ never imports the rest of
tools/; executors/ get the run's meters as hooks and an `on_usage` callback; nothing imports testing/; the root
config (config.root) is read only by commands/ and run/ (run/wiring builds every part from its own sections).
"""

__version__ = "0.1.0"
