"""partner-repo's benchmark suite: wire cost, CPU overhead, listener, concurrency and admin query scale.

Run ``python -m benchmarks`` from the repository root (``--quick`` for a tiny run); see docs/benchmarks.md.
Not part of the installed package and not collected by the default test command.
"""
