"""Fast tests mirroring the package (hermes_runner/<pkg>/ -> tests/unit/<pkg>/): the quick tier, `pytest -m "not e2e"`."""
