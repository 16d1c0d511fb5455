"""The error classes of `retry.on`: which prompt failures an in-run retry takes (agent/session.py)."""

from __future__ import annotations

import pytest

from hermes_runner.agent.session import error_class
from hermes_runner.config import ErrorClass
from hermes_runner.errors import (
    BrokenStream,
    EndpointRefused,
    ImageUnavailable,
    MalformedReply,
    ModelCallError,
    PromptTimeout,
    SandboxError,
    ToolModelError,
)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ModelCallError("HTTP 400"), ErrorClass.provider),
        (BrokenStream("cut"), ErrorClass.provider),
        (MalformedReply("not JSON"), ErrorClass.provider),
        (ToolModelError("vision: HTTP 500"), ErrorClass.tool_model),
        (SandboxError("died"), ErrorClass.sandbox),
        (PromptTimeout("slow"), ErrorClass.timeout),
        (EndpointRefused("nothing listens"), None),  # the run stops starting prompts instead
        (ImageUnavailable("no such image"), None),  # decided at start: another attempt cannot find it
        (ValueError("a bug"), None),
    ],
)
def test_error_classes_of_retry_on(exc, expected):
    assert error_class(exc) == expected
