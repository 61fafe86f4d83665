"""Tasks: data generators, datasets, metrics and corruptions, one module per task family."""
