"""partner-repo's benchmark suite: per-turn and wire cost, CPU overhead, listener, concurrency, admin query
scale, peers, recall (LoCoMo, cost vs history), the in-memory default's comfort, and import time.

Run ``python -m benchmarks`` from the repository root (``--quick`` for a tiny run, ``--no-server`` for no
server): latencies and scale are measured on a server (a throwaway SecantusDB unless ``--uri`` names one),
commands and bytes on a scripted server, and in memory only counts; see docs/benchmarks.md. Not part of the
installed package and not collected by the default test command.
"""
