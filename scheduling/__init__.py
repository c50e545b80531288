"""Optimisers with certificates: optimal T, K, budget split, learning rates, lambda, assignment, power."""
