"""Predicted vs measured: constant estimation, sweeps, figures, reports."""
