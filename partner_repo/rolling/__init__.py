"""Dialog rolling: turning the live chat window into memory units and slices."""
