"""JSON on the hot paths (HTTP replies, ledger reads): orjson, with the stdlib as the fallback.

Only for data whose exact number formatting does not matter; dataset rows (hashed into
prompt keys) and output files keep the stdlib's encoding.
"""

from __future__ import annotations

import json

import orjson


def loads(data: bytes | str) -> object:
    """Parse JSON; what orjson refuses (NaN, Infinity, lone surrogates) goes through the stdlib."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
