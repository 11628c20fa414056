"""Operator tooling: read-only queries over slices and units, and the invariant check/repair."""
