"""truncated (TSNPE) proposals, O(B * atoms) atom draws, the ``device`` option (CPU path;
CI has no GPU), and the peer benchmark's scoring helpers."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch

from dpposterior.cli import main
from dpposterior.errors import InputError
from dpposterior.mechanisms import Laplace
from dpposterior.release import load_release
from dpposterior.sbi import GaussianPrior, SimulatorModel

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "releases"


def _model():
    def simulate(theta, rng):
        return theta + rng.normal(0.0, 0.3, size=theta.shape)

    return SimulatorModel(prior=GaussianPrior([0.0], [[1.0]]), simulate=simulate,
                          mechanism=Laplace(epsilon=2.0, sensitivity=1.0), observed=[0.7])


def test_atom_indices_scale_linearly_and_stay_valid():
    from dpposterior.sbi.sppe import atom_indices

    t = time.perf_counter()
    idx = atom_indices(10_000, 10, torch.Generator().manual_seed(1))
    # the B x B multinomial it replaces took ~4 s at B = 10,000; O(B * atoms) is milliseconds
    assert time.perf_counter() - t < 1.0
    assert idx.shape == (10_000, 10)
    assert torch.equal(idx[:, 0], torch.arange(10_000))
    assert torch.all(idx.sort(dim=1).values.diff(dim=1) > 0)  # distinct within each row
    assert int(idx.min()) >= 0 and int(idx.max()) < 10_000
    again = atom_indices(10_000, 10, torch.Generator().manual_seed(1))
    assert torch.equal(idx, again)  # same generator seed, same atoms
    full = atom_indices(6, 10)
    assert full.shape == (6, 6) and all(len(set(r.tolist())) == 6 for r in full)


def test_truncated_prior_sample_respects_threshold_and_fills():
    from dpposterior.sbi.sppe import truncated_prior_sample

    model = _model()

    def log_q(theta):
        return -0.5 * (theta[:, 0] - 1.0) ** 2

    rng = np.random.default_rng(0)
    theta, rate = truncated_prior_sample(model, log_q, 500, rng, threshold=-0.5)  # |theta - 1| <= 1
    assert theta.shape == (500, 1) and np.all(np.abs(theta[:, 0] - 1.0) <= 1.0)
    assert 0.3 < rate < 0.6  # P(0 <= Z <= 2) = 0.477
    # a budget too small for n accepted draws: the accepted ones are reused, still inside the region
    theta, rate = truncated_prior_sample(model, log_q, 500, np.random.default_rng(1), threshold=-0.02,
                                         max_draws=5000)
    assert theta.shape == (500, 1) and np.all(np.abs(theta[:, 0] - 1.0) <= 0.2 + 1e-12)
    with pytest.raises(RuntimeError, match="HPR"):
        truncated_prior_sample(model, log_q, 10, np.random.default_rng(2), threshold=1.0, max_draws=10_000)


def test_resolve_device(monkeypatch):
    from dpposterior.sbi.flows import resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(InputError, match="CUDA"):
        resolve_device("cuda")
    with pytest.raises(InputError, match="cpu, cuda or auto"):
        resolve_device("tpu")


@pytest.mark.parametrize("proposal", ["truncated", "atomic"])
def test_sppe_proposals_same_seed_same_draws(proposal):
    from dpposterior.sbi.sppe import run_sppe
    from dpposterior.sbi.flows import FlowConfig

    config = FlowConfig(transforms=1, hidden=(8, 8), max_epochs=3, batch_size=50)
    a = run_sppe(_model(), simulations=80, rounds=2, rqmc_points=2, draws=50, seed=5, config=config,
                 proposal=proposal, device="cpu")
    b = run_sppe(_model(), simulations=80, rounds=2, rqmc_points=2, draws=50, seed=5, config=config,
                 proposal=proposal, device="cpu")
    assert np.array_equal(a.theta, b.theta)
    if proposal == "truncated":
        assert 0 < a.rounds[1]["acceptance"] <= 1
    with pytest.raises(ValueError, match="proposal"):
        run_sppe(_model(), simulations=80, rounds=1, config=config, proposal="mixed")


def test_infer_sppe_device_and_proposal_options():
    from dpposterior import infer

    rel = load_release(EXAMPLES / "linreg-ju-eps10.json")
    post = infer(rel, method="sppe", simulations=40, rounds=2, max_epochs=2, draws=20, chains=1, seed=3,
                 quiet=True, device="cpu", proposal="atomic", batch_size=20)
    assert post.attrs["device"] == "cpu" and post.attrs["proposal"] == "atomic"
    assert post.attrs["batch_size"] == 20 and post.posterior["beta"].shape == (1, 20, 3)
    with pytest.raises(InputError, match="device"):
        infer(rel, method="sppe", simulations=40, rounds=1, device="tpu", quiet=True)
    with pytest.raises(InputError, match="proposal"):
        infer(rel, method="sppe", simulations=40, rounds=1, proposal="mixed", quiet=True)
    with pytest.raises(InputError, match="device"):
        infer(rel, method="sple", simulations=40, rounds=1, device=3, quiet=True)


def test_cli_device_option_is_validated(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rel = str(EXAMPLES / "linreg-ju-eps10.json")
    for device, message in (("tpu", "cpu, cuda"), ("cuda", "CUDA")):
        code = main(["infer", rel, "--method", "sppe", "--device", device, "--out", str(tmp_path / "p.nc")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.startswith("error: ") and message in err and "Traceback" not in err


def test_peer_benchmark_scores_the_exact_reference_as_perfect():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from sbi_peer import exact_reference, parse_spec, score

    ref = exact_reference("linreg-ju-eps1")
    other = exact_reference("linreg-ju-eps1", seed=1)["draws"]
    s = score(other, ref)
    assert s["c2st"] < 0.56 and s["mean_err"] < 0.1 and s["sd_err"] < 0.1
    shifted = score(other + ref["sd"], ref)  # one posterior sd off in every coordinate
    assert shifted["mean_err"] == pytest.approx(1.0, abs=0.1) and shifted["c2st"] > 0.6
    assert parse_spec("sppe:batch_size=500:proposal=atomic") == ("sppe", {"batch_size": 500,
                                                                          "proposal": "atomic"})


def test_peer_benchmark_scores_a_written_posterior(tmp_path, capsys):
    """``sbi_peer.py --score``: a netCDF written by ``dpposterior infer`` is scored like the in-process runs."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from sbi_peer import DRAWS, exact_reference, score, score_files

    from dpposterior import infer

    post = infer(EXAMPLES / "linreg-ju-eps1.json", method="sppe", simulations=200, rounds=2, rqmc_points=2,
                 max_epochs=3, draws=300, chains=1, seed=0, correction="importance", quiet=True)
    path = tmp_path / "p.nc"
    post.to_netcdf(path)
    score_files("linreg-ju-eps1", [str(path)])
    line = capsys.readouterr().out.strip()
    expected = score(post.draws("beta")[:DRAWS], exact_reference("linreg-ju-eps1"))
    assert f"max |dmean|/sd {expected['mean_err']:.3f}" in line and "correction importance" in line


def test_training_presets_and_first_round_settings():
    """SPPE's ``training`` presets: "paper" is FlowConfig as App. E has it; "fast" trains round 1 on
    all M replicates per step; batch_size / max_epochs given set every round's."""
    from dpposterior.sbi.flows import FlowConfig
    from dpposterior.sbi.sppe import run_sppe, training_config

    assert training_config("paper") == FlowConfig()
    fast = training_config("fast")
    assert fast.for_round(1).replicates_per_step is None and fast.for_round(1).first_round is None
    assert fast.for_round(2) is fast and fast.replicates_per_step == 1
    given = training_config("fast", batch_size=30, max_epochs=2)
    assert given.for_round(1).batch_size == 30 and given.for_round(1).max_epochs == 2
    # round 1 with all replicates per step: every replicate of a training row is seen in each step
    seen = []
    config = FlowConfig(transforms=1, hidden=(8, 8), max_epochs=1, batch_size=500,
                        first_round={"replicates_per_step": None})
    from dpposterior.sbi import losses

    original = losses.npe_loss

    def spy(log_prob, theta, sdp):
        seen.append(sdp.shape[1])
        return original(log_prob, theta, sdp)

    import dpposterior.sbi.sppe as sppe_module

    sppe_module.npe_loss, saved = spy, sppe_module.npe_loss
    try:
        run_sppe(_model(), simulations=60, rounds=1, rqmc_points=4, draws=10, seed=1, config=config)
    finally:
        sppe_module.npe_loss = saved
    assert seen and all(k == 4 for k in seen)


def test_sppe_engine_training_option():
    """The engine's ``training`` option (``infer`` passes it once the family lists it as an analysis key)."""
    from types import SimpleNamespace

    from dpposterior.sbi.sppe import sppe_on_model

    def options(**extra):
        from dpposterior.sbi.sppe import SppeOptions

        return SppeOptions.from_inference(SimpleNamespace(
            draws=10, chains=1, seed=3, quiet=True, extra=dict(simulations=40, rounds=1, max_epochs=1, **extra)),
            "toy/sppe")

    post = sppe_on_model("toy", _model(), options(training="paper"))
    assert post.attrs["training"] == "paper" and post.attrs["num_atoms"] == 10
    assert sppe_on_model("toy", _model(), options(training="fast")).attrs["num_atoms"] == 5
    with pytest.raises(InputError, match="training"):
        sppe_on_model("toy", _model(), options(training="slow"))


def test_training_preset_reaches_the_engine_from_infer_and_the_cli(tmp_path, capsys):
    """``training`` is an analysis key of the SBI families and ``--training`` a CLI option."""
    from dpposterior import infer

    rel = load_release(EXAMPLES / "linreg-ju-eps10.json")
    post = infer(rel, method="sppe", simulations=40, rounds=1, max_epochs=2, draws=20, chains=1, seed=3,
                 quiet=True, training="fast")
    assert post.attrs["training"] == "fast" and post.attrs["num_atoms"] == 5
    path = str(EXAMPLES / "linreg-ju-eps10.json")
    for argv, message in ((["--method", "sppe", "--training", "turbo"], "training: must be one of paper, fast"),
                          (["--method", "sple", "--training", "fast"], "training: not an option of linreg-ju/sple")):
        code = main(["infer", path, *argv, "--out", str(tmp_path / "p.nc"), "--quiet"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.startswith(f"error: {message}") and err.count("\n") == 0


def test_train_ema_keeps_the_averaged_weights():
    """``FlowConfig.ema_decay``: the weights validated and returned are the exponential moving
    average of the SGD iterates (checked against a hand-rolled average on a linear model)."""
    from dpposterior.sbi.flows import FlowConfig, train

    torch.manual_seed(0)
    x = torch.randn(40, 2)
    y = x @ torch.tensor([1.5, -0.5]) + 0.1 * torch.randn(40)
    model = torch.nn.Linear(2, 1, bias=False)
    start = model.weight.detach().clone()

    def batch_loss(idx):
        return ((model(x[idx])[:, 0] - y[idx]) ** 2).mean()

    config = FlowConfig(batch_size=40, max_epochs=5, patience=100, ema_decay=0.5, weight_decay=0.0,
                        learning_rate=0.1)
    # replay: the same Adam steps by hand, averaging as we go
    replay = torch.nn.Linear(2, 1, bias=False)
    replay.weight.data.copy_(start)
    opt = torch.optim.Adam(replay.parameters(), lr=0.1)
    average = start.clone()
    averages = []
    for _ in range(5):
        loss = ((replay(x)[:, 0] - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(replay.parameters(), 5.0)
        opt.step()
        average = 0.5 * average + 0.5 * replay.weight.detach()
        averages.append(average.clone())
    index = np.arange(40)
    out = train(model, batch_loss, 40, index, index, config, torch.Generator().manual_seed(0))
    assert out["epochs"] == 5
    val = [float(((x @ a[0] - y) ** 2).mean()) for a in averages]
    best = int(np.argmin(val))
    assert out["best_val"] == pytest.approx(val[best], rel=1e-5)
    assert torch.allclose(model.weight, averages[best], atol=1e-6)
    # the last iterate is not what came back (the average lags it)
    assert not torch.allclose(model.weight, replay.weight)
    with pytest.raises(ValueError, match="ema_decay"):
        train(model, batch_loss, 40, index, index, FlowConfig(ema_decay=1.0), torch.Generator())
