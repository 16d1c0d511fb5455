"""hermes-runner: a Hydra-configured batch runner for tool-using LLM agents."""

__version__ = "0.1.0"
