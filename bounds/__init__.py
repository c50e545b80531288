"""One module per paper: every theorem's noise formula and convergence bound, as data."""
