"""CLI commands, one module per capability; each defines ``register(app, groups)`` (see fedbound/cli.py)."""
