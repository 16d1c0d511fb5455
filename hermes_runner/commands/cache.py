"""`hermes-cache info|clear [--dir DIR] [--expired]`: the response cache's size, or empty it (model/cache.py)."""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

from hermes_runner.commands import refusal
from hermes_runner.errors import ExitCode
from hermes_runner.model.cache import ENV_DIR, default_dir, open_store, remove_store


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="hermes-cache", description="Show the size of the response cache, or empty it (docs/caching.md)."
    )
    ap.add_argument("command", choices=["info", "clear"], help="info: entries and bytes; clear: remove entries")
    ap.add_argument("--dir", help=f"the cache directory (default: ${ENV_DIR}, else the user cache dir)")
    ap.add_argument("--expired", action="store_true", help="clear: only the entries past their cache.expire")
    args = ap.parse_args(argv)
    directory = Path(args.dir).expanduser() if args.dir else default_dir()
    if args.command == "info" and not directory.exists():
        print(f"{directory}: no response cache (0 entries)")
        return 0
    try:
        store = open_store(directory)
    except (sqlite3.Error, OSError) as exc:
        if args.command == "clear" and isinstance(exc, sqlite3.DatabaseError):
            remove_store(directory)
            print(f"{directory}: unreadable ({exc}); removed, the next run starts a new cache")
            return 0
        return refusal(f"the response cache at {directory} cannot be opened: {exc}", ExitCode.FAILED)
    with store:
        if args.command == "info":
            print(f"{directory}: {len(store):,} replies, {_size(store.volume())} on disk")
            return 0
        removed = store.expire() if args.expired else store.clear()
        print(f"{directory}: {removed:,} replies removed, {_size(store.volume())} on disk")
    return 0
