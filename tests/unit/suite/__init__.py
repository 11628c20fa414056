"""The suite's own tools: the skip summary and the routing checker of the command-routing test."""
