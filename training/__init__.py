"""The compact PyTorch simulator: data, partitions, models, one engine, one file per algorithm.

Read in this order: ``engine.py`` (the round, the algorithm interface, what is recorded), ``multirun.py``
(many runs in one batch), ``nbafl.py`` and
``udp.py`` (two algorithms as short files; then ``adaptive.py``, ``dppfl.py``, ``wpfl.py`` +
``quantization.py``), ``plan.py`` + ``privacy.py`` (noise plans and the ledger), then
the building blocks: ``models.py``, ``grads.py``, ``clipping.py``, ``local.py``, ``noise.py``,
``participation.py``, ``data.py``, ``partitions.py``, ``federation.py``, ``metrics.py``, ``checkpoint.py``,
``config.py`` (the ``[train]`` section).  Noise plans are built from configs by
``fedbound.validation.recipes.<algo>`` recipes, which is also what ``fedbound train`` runs.

Imports torch; ``import fedbound`` alone does not.
"""

from fedbound.training.adaptive import PADPFL
from fedbound.training.clipping import clip_rows, per_sample_clipped_grad, per_sample_clipped_grad_vmap
from fedbound.training.config import TRAIN_SECTION
from fedbound.training.data import Dataset, convex_constants, convex_objective, load_dataset
from fedbound.training.dppfl import DPPFL
from fedbound.training.engine import Algorithm, RoundContext, RunOptions, RunResult, RunState, run
from fedbound.training.federation import ClientBatch, ClientData
from fedbound.training.local import LocalSGD, select_minibatch
from fedbound.training.models import Model, build_model
from fedbound.training.multirun import BatchJob, run_batch
from fedbound.training.nbafl import NbAFL
from fedbound.training.noise import Streams
from fedbound.training.plan import NoisePlan, View
from fedbound.training.privacy import PrivacyLedger
from fedbound.training.udp import UDP, CRDRule
from fedbound.training.wpfl import WPFL, WPFLSchedule

__all__ = [
    "run", "run_batch", "BatchJob", "Algorithm", "RoundContext", "RunOptions", "RunResult", "RunState",
    "NoisePlan", "View", "PrivacyLedger", "Streams",
    "NbAFL", "UDP", "CRDRule", "PADPFL", "DPPFL", "WPFL", "WPFLSchedule", "LocalSGD", "select_minibatch",
    "clip_rows", "per_sample_clipped_grad", "per_sample_clipped_grad_vmap",
    "Model", "build_model", "Dataset", "load_dataset", "convex_constants", "convex_objective",
    "ClientData", "ClientBatch", "TRAIN_SECTION",
]
