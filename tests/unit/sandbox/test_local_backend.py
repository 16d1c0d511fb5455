"""The local backend's life cycle under cancellation (Ctrl-C while sandboxes are being made)."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from hermes_runner.config import SandboxConfig
from hermes_runner.dataset import Prompt
from hermes_runner.sandbox.local import backend as local

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def test_sandboxes_made_for_cancelled_prompts_are_released_before_shutdown_ends(tmp_path):
    cfg = SandboxConfig()
    cfg.local.root = str(tmp_path / "sbx")
    free = len(local._FREE_SLOTS)

    async def main() -> None:
        backend = local.LocalBackend(cfg, "cancel")
        await backend.start(set())
        kept = await backend.create(Prompt(0, "kept", "p"))
        creating = [asyncio.ensure_future(backend.create(Prompt(i, f"k{i}", "p"))) for i in range(1, 33)]
        await asyncio.sleep(0)  # each is in its thread now
        for t in creating:
            t.cancel()
        await asyncio.gather(*creating, return_exceptions=True)
        assert all(t.cancelled() for t in creating)
        await kept.close()
        await backend.shutdown()  # the threads finish meanwhile: nothing may change under it

    asyncio.run(main())
    assert len(local._FREE_SLOTS) == free  # every slot back, the abandoned ones too
    assert not any((tmp_path / "sbx").iterdir())
