"""The Hermes ShareGPT trajectory format: `hermes` (the text format both ways: the system turn, `<think>`,
`<tool_call>` and `<tool_response>` blocks, and their readers), `entry` (one trajectory entry from a finished
conversation, another runner's row conformed to it, the HF features of the rows), `openai` (an entry as OpenAI
chat messages) and `export` (a run's trajectories as training datasets).

It speaks OpenAI-style dicts, never code: it may import only `rundir/` (export reads run dirs), `dataset`,
`usage`, `util/`, `config` and `errors`, never `agent/`, `tools/`, `model/` or `executors/`. Importing it
loads neither the agent nor the `openai` client."""
