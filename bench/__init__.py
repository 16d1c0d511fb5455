"""Benchmarks: `python -m bench.throughput` (see docs/readme/performance.md)."""
