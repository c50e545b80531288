"""Bridges from a fedbound plan to the frameworks teams deploy on (DESIGN.md, "Layout": ``deploy/``).

Contract: a bridge runs a paper's mechanism *as fedbound's engine defines it* (the registry's recipe:
``fedbound.validation.recipes.<paper>``; its noise plan from the registry's ``noise()``), on the framework's
transport, with fedbound's :class:`~fedbound.training.privacy.PrivacyLedger` accounting every round.  It
re-implements no noise, clipping or accounting: the client side calls the algorithm's own ``local_update``
and ``upload`` hooks, the server side drives :class:`~fedbound.training.engine.Runner` (participants,
weights, budget check, server noise, ledger, metrics, checkpoint).  deploy/ imports scheduling, training
and accounting, never the reverse.  Deployed, every party draws its noise from its own OS entropy
(:mod:`fedbound.training.secure_noise`), never from the run seed the config carries; the seed fixes the data
split and the initial model (docs/guides/flower.md, "Randomness").

* :mod:`fedbound.deploy.flower_session`: the run configuration a Flower app carries, and what a client
  and the server build from it;
* :mod:`fedbound.deploy.flower_client`: the ClientApp (one client's update and noised upload per message);
* :mod:`fedbound.deploy.flower_server`: the ServerApp (fedbound's Runner over Flower's Grid);
* :mod:`fedbound.deploy.flower_app`: ``fedbound flower`` (:func:`~fedbound.deploy.flower_app.flower`, which
  the CLI runs): write the app directory, run it on Flower's simulation engine;
* :mod:`fedbound.deploy.flower_deployment`: ``--deployment local``, the app on Flower's deployment engine (a
  SuperLink and one SuperNode per client as processes, TLS from :mod:`fedbound.deploy.tls`), every process
  started and stopped through :mod:`fedbound.deploy.processes` (its watchdog:
  :mod:`fedbound.deploy.watchdog`); the ServerApp's per-round events: :mod:`fedbound.deploy.flower_events`;
* :mod:`fedbound.deploy.flower_privacy`: Flower's own accountant (its PrivacyConfig from the plan, its
  ``would_exceed`` before each round) beside fedbound's ledger;
* :mod:`fedbound.deploy.replay`: what a party keeps on its own disk so a repeated round releases nothing
  new (a client's kept uploads, the server's secret that keys its participant sample);
* :mod:`fedbound.deploy.mechanisms`: mechanisms deployed besides the registry's papers (central DP-FedAvg:
  :mod:`fedbound.deploy.dpfedavg`, its Flower server side :mod:`fedbound.deploy.flower_dpfedavg`).
"""

FLOWER_HINT = "fedbound flower needs Flower: install the flower extra: pip install 'fedbound[flower]'"
"""The one-line install hint every Flower entry point gives when ``flwr`` is missing."""
