"""The chat model: the `ChatModel` Protocol and `CallHook` (`base`), the OpenAI client (`client`, with `stream`
and `retry`), reasoning, rate limits, local serving.

It may import only vocabulary: config, errors, usage, util. `serve_guard.py` imports the standard library only."""
