"""``fedbound.validation.recipes``: Training recipes: ``fedbound train PAPER CONFIG`` from a config to a
finished, resumable run. One module per paper defines ``RECIPE`` (a :class:`runner.Recipe`): it reads the
paper's config section, asks the paper's ``noise()`` (fedbound.bounds) for the noise plan and hands model,
data and plan to the training engine; ``runner`` is the generic part (run folder, checkpoint, summary). A
recipe never computes a sigma itself.

Modules: ``adaptive``, ``dppfl``, ``nbafl``, ``runner``, ``udp``, ``wpfl``.
"""
