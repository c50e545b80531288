"""What connects the theory to runs, one subpackage per capability (each states its contract in
its docstring):

* ``recipes``    ``fedbound train``: one training recipe per paper
* ``sweep``      many runs, one batch, resumable (``fedbound sweep``)
* ``estimate``   the bounds' constants measured, and validated against training
* ``reproduce``  the papers' figures re-created and their claims judged; the bound figures
* ``audit``      the empirical privacy audit, the sensitivity probe, the provable sensitivity
* ``report``     one HTML page over a results folder
"""
