"""The contract layer: the suite that also runs against the server ``MONGODB_URI`` names (docs/testing.md)."""
