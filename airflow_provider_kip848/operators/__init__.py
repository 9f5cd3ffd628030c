"""Operators: one per runbook step, idempotent, returning small JSON (see docs/operators.md)."""
