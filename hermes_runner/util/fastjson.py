"""JSON on the hot paths (HTTP bodies and replies, ledger reads): orjson, with the stdlib as the fallback.

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


def dumps(obj: object) -> bytes:
    """Compact UTF-8 JSON (the stdlib for what orjson cannot encode: ints beyond 64 bits, non-str keys)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
