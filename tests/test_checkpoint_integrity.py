"""Issue 8, items 1, 4 and 7: checkpoints are checksummed and safely loaded, damaged ones are refused,
kill/resume stays exact, run directories are only ever deleted when fedbound made them, a diverged run
stops."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from fedbound.errors import ConfigError, TrainingDiverged
from fedbound.scheduling.crd import CRDPolicy
from fedbound.tests._training_reference import module_with, resumed_and_full, tiny_setup
from fedbound.training import checkpoint as ckpt
from fedbound.training.engine import Algorithm, RunOptions, run
from fedbound.training.local import LocalSGD
from fedbound.training.nbafl import NbAFL
from fedbound.training.plan import NoisePlan, View
from fedbound.training.udp import UDP

F64 = RunOptions(dtype=torch.float64, eval_clients=False)


def _plan(rounds: int = 3, n: int = 6) -> NoisePlan:
    return NoisePlan(rounds=rounds, num_clients=n, sigma={"uplink": np.full(rounds, 0.01),
                     "server": np.full(rounds, 0.003)}, sensitivity={"uplink": 0.05}, eps=1e6, delta=0.01,
                     views=(View("uplink", "upload", max_releases=1),))


def _nbafl(rounds: int = 3) -> NbAFL:
    return NbAFL(rounds, 3.0, LocalSGD(steps=2, lr=0.2))


@pytest.fixture(scope="module")
def setup():
    _, _, data, model = tiny_setup()
    return data, model


@pytest.fixture
def stopped_run(setup, tmp_path):
    """A run stopped after 2 of 3 rounds: its checkpoint on disk."""
    data, model = setup
    run(_nbafl(), model, data, plan=_plan(), options=F64, run_dir=tmp_path, run_key="k", stop_after=2)
    return tmp_path / ckpt.CHECKPOINT


def _resume(setup, run_dir):
    data, model = setup
    return run(_nbafl(), model, data, plan=_plan(), options=F64, run_dir=run_dir, run_key="k")


def _flip_bit(path, offset_from_end: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) - offset_from_end] ^= 0x10
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage, message", [
    (lambda p: _flip_bit(p, 200), "does not match its checksum"),
    (lambda p: _flip_bit(p, 5), "does not match its checksum"),
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "truncated"),
    (lambda p: p.write_bytes(b""), "the file is empty"),
    (lambda p: p.write_bytes(b"\x80\x02garbage"), "no fedbound checkpoint header"),
])
def test_a_damaged_checkpoint_is_refused_with_one_line(setup, stopped_run, damage, message):
    damage(stopped_run)
    with pytest.raises(ckpt.CheckpointError, match=message) as info:
        _resume(setup, stopped_run.parent)
    assert "\n" not in str(info.value) and str(stopped_run) in str(info.value)


def test_a_checkpoint_with_a_valid_checksum_but_code_inside_is_not_executed(setup, stopped_run, tmp_path):
    """weights_only loading: a pickle that would call a function is refused, the function never runs."""
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (marker.write_text, ("ran",))

    body = pickle.dumps({"format": 2, "run_key": "k", "x": Evil()})
    header = stopped_run.read_bytes().split(b"\n", 1)[0].split(b" ")
    header[3], header[4] = ckpt._digest(body).encode(), str(len(body)).encode()
    stopped_run.write_bytes(b" ".join(header) + b"\n" + body)
    with pytest.raises(ckpt.CheckpointError, match="cannot be read safely"):
        _resume(setup, stopped_run.parent)
    assert not marker.exists()


def test_a_checkpoint_of_an_older_format_is_refused_naming_it(setup, stopped_run):
    """Format 2 held the ledger as per-client curves; it is refused in one line, not misread."""
    head, body = stopped_run.read_bytes().split(b"\n", 1)
    fields = head.split(b" ")
    fields[1], fields[4] = b"2", str(len(body)).encode()
    stopped_run.write_bytes(b" ".join(fields) + b"\n" + body)
    with pytest.raises(ckpt.CheckpointError, match="older fedbound .checkpoint format 2") as info:
        _resume(setup, stopped_run.parent)
    assert "\n" not in str(info.value)


def test_save_streams_the_body_without_copies_in_memory(tmp_path):
    """A 40 MB model is written without a copy of it in Python memory (no buffer of the body, no joined
    header); the file still verifies and loads to the same state."""
    import tracemalloc

    from fedbound.training.engine import RunState

    params = torch.arange(10_000_000, dtype=torch.float32)
    state = RunState(round=1, rounds=2, global_params=params, ledger={"groups": {"group_of": np.arange(5)}})
    tracemalloc.start()
    try:
        ckpt.save(tmp_path, "k", state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, peak  # the old save held three copies of the body (> 120 MB)
    loaded = ckpt.load(tmp_path, "k")
    assert torch.equal(loaded.global_params, params)
    np.testing.assert_array_equal(loaded.ledger["groups"]["group_of"], np.arange(5))


def test_deleting_a_damaged_checkpoint_restarts_from_round_zero(setup, stopped_run):
    stopped_run.write_bytes(b"")
    with pytest.raises(ckpt.CheckpointError):
        _resume(setup, stopped_run.parent)
    stopped_run.unlink()
    assert _resume(setup, stopped_run.parent).summary["resumed_from_round"] == 0


def test_checkpoint_of_another_run_is_a_config_error(setup, stopped_run):
    data, model = setup
    with pytest.raises(ConfigError, match="different run"):
        run(_nbafl(), model, data, plan=_plan(), options=F64, run_dir=stopped_run.parent, run_key="other")


def test_udp_crd_kill_and_resume_is_identical(setup, tmp_path):
    """The fifth algorithm (nbafl, adaptive, dppfl and wpfl have theirs in their own test files)."""
    data, model = setup
    plan = NoisePlan(rounds=6, num_clients=6, sigma={"uplink": np.full(6, 0.05)},
                     sensitivity={"uplink": 0.01}, eps=10.0, delta=1e-3,
                     views=(View("uplink", "upload", sample_rate=0.5),),
                     paper_accountant="udp_moments")

    def algo():
        return UDP(6, clip_norm=1.0, lr=0.1, clients_per_round=3, crd=CRDPolicy(beta=0.8, zeta=1e9))

    cols = ["round", "loss", "sigma", "epsilon_spent", "epsilon_spent_paper"]
    resumed, _ = resumed_and_full(algo, model, data, plan, F64, tmp_path, 2, cols)
    assert resumed.state.algo_state["discounts"]  # CRD state went through the checkpoint


class _DivergesAtRound2(Algorithm):
    name = "diverges"

    def server_update(self, ctx, aggregate):
        return aggregate * float("nan") if ctx.round == 1 else aggregate


def test_a_diverged_run_stops_naming_the_round_and_keeps_the_last_good_checkpoint(setup, tmp_path):
    data, model = setup
    with pytest.raises(TrainingDiverged, match="diverged at round 2") as info:
        run(_DivergesAtRound2(4, LocalSGD(steps=1, lr=0.1)), model, data, options=F64, run_dir=tmp_path,
            run_key="k")
    assert "checkpoint of round 1" in str(info.value)
    kept = ckpt.load(tmp_path, "k")
    assert kept.round == 1 and bool(torch.isfinite(kept.global_params).all())


def test_a_huge_learning_rate_diverges_instead_of_reporting_a_final_loss(setup):
    data, model = setup
    with pytest.raises(TrainingDiverged, match="diverged at round 1"):
        run(NbAFL(3, 1e300, LocalSGD(steps=3, lr=1e300)), model, data, options=F64)


def test_initial_loss_is_the_loss_of_the_initial_model_before_round_1(setup):
    data, model = setup
    init = model.init(torch.Generator().manual_seed(3), torch.float64)
    res = run(_nbafl(2), model, data, options=F64, init_params=init)
    module = module_with(model, init)
    losses = []
    for i in range(data.num_clients):
        n = int(data.sizes[i])
        losses.append(float(torch.nn.functional.cross_entropy(module(data.x[i, :n]), data.y[i, :n])))
    p = data.sizes / data.sizes.sum()
    assert res.summary["initial_loss"] == pytest.approx(float(p @ np.array(losses)), rel=1e-9)
    first_round = res.metrics[res.metrics["client"].isna()]["loss"].iloc[0]
    assert res.summary["initial_loss"] != pytest.approx(float(first_round), rel=1e-6)


class TestRunDirectory:
    def test_overwrite_refuses_a_folder_fedbound_did_not_make_and_names_its_content(self, tmp_path):
        (tmp_path / "precious.txt").write_text("keep me")
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "notes.md").write_text("and me")
        with pytest.raises(ConfigError, match=r"not a fedbound run directory.*precious\.txt, sub/"):
            ckpt.prepare_run_dir(tmp_path, "k", overwrite=True)
        assert (tmp_path / "precious.txt").read_text() == "keep me"
        assert (tmp_path / "sub" / "notes.md").read_text() == "and me"

    def test_overwrite_empties_a_marked_run_directory(self, tmp_path):
        run_dir = ckpt.prepare_run_dir(tmp_path / "run", "k")
        assert (run_dir / ckpt.RUN_MARKER).read_text().endswith("run_key = k\n")
        (run_dir / "checkpoint.pt").write_bytes(b"old")
        ckpt.prepare_run_dir(run_dir, "k2", overwrite=True)
        assert sorted(p.name for p in run_dir.iterdir()) == [ckpt.RUN_MARKER]

    def test_an_existing_user_folder_is_used_but_never_marked(self, tmp_path):
        (tmp_path / "mine.txt").write_text("x")
        ckpt.prepare_run_dir(tmp_path, "k")
        assert not (tmp_path / ckpt.RUN_MARKER).exists()
        with pytest.raises(ConfigError, match="not a fedbound run directory"):
            ckpt.prepare_run_dir(tmp_path, "k", overwrite=True)

    @pytest.mark.parametrize("bad, message", [("file", "is an existing file"), ("", "names no folder"),
                                              ("/proc/fedbound-x", "cannot be created or written")])
    def test_bad_out_is_refused_before_anything_runs(self, tmp_path, bad, message):
        if bad == "file":
            bad = tmp_path / "a_file"
            bad.write_text("x")
        with pytest.raises(ConfigError, match=message):
            ckpt.prepare_run_dir(bad, "k")

    def test_engine_marks_a_run_directory_it_creates(self, setup, tmp_path):
        data, model = setup
        run(_nbafl(1), model, data, options=F64, run_dir=tmp_path / "new", run_key="k")
        assert (tmp_path / "new" / ckpt.RUN_MARKER).is_file()


_KILLED_RUN = """
import os, signal, sys
import numpy as np, torch
from fedbound.tests._training_reference import tiny_setup
from fedbound.tests.test_checkpoint_integrity import F64, _nbafl, _plan
from fedbound.training.engine import run

class KilledMidRound3(type(_nbafl())):
    def after_round(self, ctx, new_global):
        if ctx.round == 2:  # round 3 half done, its checkpoint not written: SIGKILL, no cleanup runs
            os.kill(os.getpid(), signal.SIGKILL)
        super().after_round(ctx, new_global)

_, _, data, model = tiny_setup()
algo = _nbafl()
algo.__class__ = KilledMidRound3
run(algo, model, data, plan=_plan(), options=F64, run_dir=sys.argv[1], run_key="k")
"""


def test_sigkill_mid_round_then_resume_is_identical(setup, tmp_path):
    proc = subprocess.run([sys.executable, "-c", _KILLED_RUN, str(tmp_path)], capture_output=True,
                          timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-500:]
    assert ckpt.load(tmp_path, "k").round == 2
    data, model = setup
    resumed = _resume(setup, tmp_path)
    full = run(_nbafl(), model, data, plan=_plan(), options=F64)
    assert resumed.summary["resumed_from_round"] == 2
    assert torch.equal(resumed.params, full.params)
    cols = ["round", "loss", "sigma", "epsilon_spent"]
    assert resumed.metrics[cols].equals(full.metrics[cols])


@pytest.mark.parametrize("name", ["nbafl", "udp", "adaptive", "dppfl", "wpfl"])
def test_every_algorithm_refuses_its_damaged_checkpoint_through_the_cli(name, tmp_path, capsys):
    """Each paper's `fedbound train` on its example (2 rounds): a bit flip in checkpoint.pt is one line naming
    the file, exit 2; the run directory is kept."""
    from pathlib import Path

    from fedbound.cli import main

    example = Path(__file__).resolve().parents[1] / "examples" / f"{name}_mnist.toml"
    out = tmp_path / "run"
    args = ["train", name, str(example), "--set", "T=2", "--out", str(out), "--no-progress", "--json"]
    assert main(args) == 0, capsys.readouterr().err
    capsys.readouterr()
    _flip_bit(out / ckpt.CHECKPOINT, 50)
    assert main(args) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "checkpoint" in err[0] and (out / ckpt.CHECKPOINT).exists()
