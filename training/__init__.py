"""The compact PyTorch simulator: data, partitions, models, one engine, one file per algorithm."""
