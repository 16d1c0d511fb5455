"""Test infrastructure shipped with the package: the `#script` grammar (script.py), the scripted OpenAI-compatible
server and its loopback app (scripted_server.py, loopback.py), and ScriptedModel, the same script in process (model.py).

It imports only vocabulary (config, errors, usage, util) and `model/base.py`; only tests/ and bench/ import it."""
