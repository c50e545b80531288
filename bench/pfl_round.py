"""A FedAvg + DP round against Apple's pfl 0.6 (issue 35 item 3), at 1 and 2 threads.

Three cases, every client in the round, local full-batch SGD, each client's model update clipped to L2 norm
1 and Gaussian noise on the aggregate: 1,000 clients x 20 digits samples (64 features, 10 classes), 5 local
steps, logistic regression (``logreg``) and a 64-32-10 MLP (``mlp``); 50 clients x 100 MNIST-subset
samples, 10 local steps, the 784-256-10 MLP of the NbAFL examples (``mlp_mnist``: compute per client
dominates).  Ours: the engine's round (``NbAFL`` without the proximal term:
whole-update clipping, uplink noise, the privacy ledger).  pfl's: ``FederatedAveraging`` on its
``SimulatedBackend`` with ``CentrallyAppliedPrivacyMechanism(GaussianMechanism)``, the same data as a
``FederatedDataset`` (one central iteration, no evaluation).  Each thread count runs in a fresh
subprocess with ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` and ``torch.set_num_threads`` set for both sides;
the sides are timed interleaved in CPU seconds (``time.process_time``; the machine may be shared).

Targets: ours <= 0.5x pfl's time for the MLPs and <= 0.1x for the logistic model, at 1 thread and at 2.
Without pfl installed (``pip install pfl==0.6.*``; it must not change torch) the comparison is reported
unavailable.  ``python bench/pfl_round.py [--quick]``.  Writes ``bench/results/pfl_round.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import fmt, interleaved, load, ratio, write_result  # noqa: E402

LR, CLIP, SIGMA = 0.5, 1.0, 0.5
CASES = {"logreg": ("digits", 1000, 20, 5, 0), "mlp": ("digits", 1000, 20, 5, 32),
         "mlp_mnist": ("mnist", 50, 100, 10, 256)}
"""name: (dataset, clients, samples per client, local steps, hidden width; 0: logistic regression)."""
TARGETS = {"logreg": 0.1, "mlp": 0.5, "mlp_mnist": 0.5}
HEADLINE = ("A FedAvg + DP round against Apple's pfl {pfl}, CPU time, 1 thread / 2 threads: logistic "
            "regression (1,000 clients x 20 samples) "
            "{threads[1_thread][logreg][fedbound_over_pfl][median]:.3f}x / "
            "{threads[2_threads][logreg][fedbound_over_pfl][median]:.3f}x pfl's, MLP 64-32-10 "
            "{threads[1_thread][mlp][fedbound_over_pfl][median]:.3f}x / "
            "{threads[2_threads][mlp][fedbound_over_pfl][median]:.3f}x, MLP 784-256-10 (50 clients x 100 "
            "samples, compute-bound) {threads[1_thread][mlp_mnist][fedbound_over_pfl][median]:.2f}x / "
            "{threads[2_threads][mlp_mnist][fedbound_over_pfl][median]:.2f}x.")
QUICK = "--quick" in sys.argv
REPEAT = 3 if QUICK else 5


def _data(dataset: str, size: int):
    import numpy as np

    from fedbound.training.data import digits, mnist_subset

    ds = (digits if dataset == "digits" else mnist_subset)(test_fraction=0.0)
    reps = -(-size // len(ds.y_train))
    x = np.concatenate([ds.x_train] * reps)[:size].astype(np.float32)
    y = np.concatenate([ds.y_train] * reps)[:size].astype(np.int64)
    return x, y


def _ours(x, y, clients: int, samples: int, steps: int, hidden: int):
    import numpy as np

    from fedbound.training.engine import RunOptions, run
    from fedbound.training.federation import ClientData
    from fedbound.training.local import LocalSGD
    from fedbound.training.models import build_model
    from fedbound.training.nbafl import NbAFL
    from fedbound.training.noise import Streams
    from fedbound.training.partitions import iid
    from fedbound.training.plan import NoisePlan, View

    data = ClientData.from_partition(x, y, iid(len(y), clients, np.random.default_rng(0), samples))
    model = build_model("mlp" if hidden else "logreg", (x.shape[1],), 10, hidden=max(hidden, 1))
    init = model.init(Streams(0).generator("init"))
    plan = NoisePlan(rounds=1, num_clients=clients, sigma={"uplink": np.full(1, SIGMA)},
                     sensitivity={"uplink": 2 * CLIP / samples}, eps=1e6, delta=1e-5,
                     views=(View("uplink", "upload", max_releases=1),))
    algo = NbAFL(1, CLIP, LocalSGD(steps=steps, lr=LR))
    opts = RunOptions(eval_every=0, eval_clients=False)
    return lambda: run(algo, model, data, plan=plan, options=opts, init_params=init).params


def _pfl(x, y, clients: int, samples: int, steps: int, hidden: int):
    import numpy as np
    import torch
    from pfl.aggregate.simulate import SimulatedBackend
    from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
    from pfl.data.dataset import Dataset
    from pfl.data.federated_dataset import FederatedDataset
    from pfl.data.sampling import get_user_sampler
    from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
    from pfl.model.pytorch import PyTorchModel
    from pfl.privacy import CentrallyAppliedPrivacyMechanism, GaussianMechanism

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dim = x.shape[1]
            self.net = torch.nn.Linear(dim, 10) if not hidden else torch.nn.Sequential(
                torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))

        def forward(self, inputs):
            return self.net(inputs)

        def loss(self, inputs, labels, eval=False):  # noqa: A002 - pfl's signature
            return torch.nn.functional.cross_entropy(self(inputs), labels.long())

        def metrics(self, inputs, labels, eval=False):  # noqa: A002
            return {}

    users = {u: [x[u * samples:(u + 1) * samples], y[u * samples:(u + 1) * samples]] for u in range(clients)}
    train = FederatedDataset(lambda u: Dataset(users[u], user_id=u),
                             get_user_sampler("minimize_reuse", list(range(clients))))
    module = Net()
    model = PyTorchModel(module, local_optimizer_create=torch.optim.SGD,
                         central_optimizer=torch.optim.SGD(module.parameters(), 1.0))
    mech = CentrallyAppliedPrivacyMechanism(GaussianMechanism(CLIP, SIGMA))
    backend = SimulatedBackend(training_data=train, val_data=train, postprocessors=[mech])
    algo_params = NNAlgorithmParams(central_num_iterations=1, evaluation_frequency=10**6,
                                    train_cohort_size=clients, val_cohort_size=None)
    # full batch: one step per epoch (local_num_steps caps the batches of one epoch, so with full batches it
    # would leave pfl at one step whatever its value)
    train_params = NNTrainHyperParams(local_learning_rate=LR, local_num_epochs=steps, local_num_steps=None,
                                      local_batch_size=None)
    np.random.seed(0)
    return lambda: FederatedAveraging().run(algo_params, backend, model, train_params,
                                            NNEvalHyperParams(local_batch_size=None),
                                            send_metrics_to_platform=False)


def _child(threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    out = {"torch_threads": torch.get_num_threads()}
    for name, (dataset, *case) in CASES.items():
        x, y = _data(dataset, case[0] * case[1])
        t = interleaved({"fedbound": _ours(x, y, *case), "pfl": _pfl(x, y, *case)}, repeat=REPEAT,
                        clock=time.process_time)
        r = ratio(t["fedbound"], t["pfl"])
        out[name] = {"cpu_seconds": {k: v.to_json() for k, v in t.items()}, "fedbound_over_pfl": r,
                     "target": f"<= {TARGETS[name]}x", "met": r["median"] <= TARGETS[name]}
    return out


def main() -> dict:
    try:
        import pfl
    except ImportError:
        payload = {"measured": False, "reason": "pfl is not installed (pip install 'pfl==0.6.*')"}
        write_result("pfl_round", payload)
        print(payload["reason"])
        return payload
    payload: dict = {"what": "FedAvg + DP round (clip + Gaussian noise), CPU seconds",
                     "cases": {k: dict(zip(("dataset", "clients", "samples", "local_steps", "hidden"), v,
                                           strict=True)) for k, v in CASES.items()}, "pfl": pfl.__version__,
                     "load_before": load(), "threads": {}}
    for threads in (1, 2):
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
               "PYTHONWARNINGS": "ignore"}
        out = subprocess.run([sys.executable, __file__, "--child", str(threads), *sys.argv[1:]], check=True,
                             capture_output=True, text=True, env=env)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        payload["threads"][f"{threads}_thread{'s' if threads > 1 else ''}"] = res
        for name in TARGETS:
            print(f"{threads} thread(s), {name}: fedbound / pfl = {fmt(res[name]['fedbound_over_pfl'], 3)} "
                  f"CPU s (target <= {TARGETS[name]}x)", flush=True)
    payload["load_after"] = load()
    payload["met"] = all(r[name]["met"] for r in payload["threads"].values() for name in TARGETS)
    write_result("pfl_round", payload)
    return payload


if __name__ == "__main__":
    if "--child" in sys.argv:
        print(json.dumps(_child(int(sys.argv[sys.argv.index("--child") + 1]))))
    else:
        main()
