"""The ground at the package root: models, events, validation, normalization, durations, settings."""
