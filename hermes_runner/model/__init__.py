"""The chat model: the `ChatModel` Protocol (`base`), the OpenAI client, reasoning, rate limits, local serving.

It may import only vocabulary: config, errors, usage, util. `serve_guard.py` imports the standard library only."""
