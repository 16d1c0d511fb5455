"""Test infrastructure shipped with the package: the scripted OpenAI-compatible server and its loopback app.

It imports only vocabulary (config, errors, usage, util) and `model/base.py`; only tests/ and bench/ import it."""
