"""The package as a whole: layout, public surface, installed form; the README, CI and image configs."""
