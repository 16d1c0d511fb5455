"""Shared test helpers (imported by tests, never by the product)."""
