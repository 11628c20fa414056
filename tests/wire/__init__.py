"""The wire layer: the real driver against a scripted mockupdb server (docs/testing.md)."""
