"""The curator: records -> a release, one party or several, Gaussian (analytic) or Laplace noise, with
the budget split of ``--epsilon-split`` (Alparslan et al. Sec. 3; adaSSP, Wang 2018)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import sensitivity
from ...errors import InputError
from ...mechanisms import analytic_sigma, draw_noise, get_mechanism
from ...mechanisms.base import NoiseShape
from ...release import FORMAT, default_delta
from .._curate import curator, curator_options, numeric_column, require_column
from .release import ADASSP_MECHANISM, FAMILY_NAME, LINREG_MECHANISMS, SPLITS
from .sensitivity import design_row_norm


# ----------------------------------------------------------------------------- curator


#: the linear-regression curator's typed options (docs/cli.md, "Curator options")
LinearRegressionCuratorOptions = curator_options(
    FAMILY_NAME, "features", "response", "bounds", "x_norm", "y_abs", "epsilon_split", "delta", "mechanism", "parties",
    "intercept", module=__name__)


@curator(LinearRegressionCuratorOptions)
def curate(frame, options) -> dict:
    """Clip rows to the public bounds, split them into J parties in order, add noise per party.

    ``--epsilon-split`` chooses what each party releases with its full (eps, delta):
    ``xtx,xty`` (default; the paper's joint Gaussian mechanism, Sec. 3), ``xtx,xty,yty``
    (Bernstein & Sheldon; default with ``--mechanism laplace``), ``halves`` ((eps/2, delta/2)
    on each of xtx and xty with their own sensitivities, Dwork et al. 2014b), ``min-variance``
    (``halves`` when its sigma_s^2 + sigma_z^2 <= sigma_joint^2, else ``xtx,xty`` -- the rule of
    the authors' code, which reproduces their Table 1; it depends only on public bounds) or
    ``adassp`` (Wang 2018 Alg. 2, as in the authors' code: (eps/3, delta/3) on each of xtx,
    xty and the smallest eigenvalue of xtx).
    """

    feats = options.features
    if not feats:
        raise InputError("features", "is required for linear-regression (--features A,B)")
    for f in feats:
        require_column(frame, f, "features")
    require_column(frame, options.response, "response")
    if options.response in feats:
        raise InputError("response", "must not also be a feature")
    X = np.column_stack([numeric_column(frame, f, "features") for f in feats])
    y = numeric_column(frame, options.response, "response")
    mechanism = options.mechanism or "gaussian"
    if mechanism not in LINREG_MECHANISMS:
        raise InputError("mechanism", f"must be {' or '.join(LINREG_MECHANISMS)} (got {mechanism!r})")
    gaussian = get_mechanism(mechanism).noise_shape is NoiseShape.GAUSSIAN

    # --delta is the Gaussian mechanism's; the Laplace mechanism is pure epsilon-DP
    if not gaussian and options.delta is not None:
        raise InputError("delta", f"not an option of the linear-regression curator with --mechanism {mechanism} "
                                  "(pure epsilon-DP)")
    # Laplace noise: Bernstein & Sheldon's release, which includes yty
    split = options.epsilon_split or ("xtx,xty" if gaussian else "xtx,xty,yty")
    split = split.replace(" ", "")
    if split not in SPLITS:
        raise InputError("epsilon-split", "must be one of " + ", ".join(SPLITS) + " for linear-regression")
    if split in ("adassp", "min-variance") and not gaussian:
        raise InputError("epsilon-split", f"{split} uses the gaussian mechanism")
    x_range = y_range = None
    if options.bounds is not None:
        lo, hi = (float(v) for v in options.bounds)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InputError("bounds", f"must be finite with LO < HI (got {lo:g} {hi:g})")
        X = np.clip(X, lo, hi)
        y = np.clip(y, lo, hi)
        x_range = y_range = [lo, hi]
    x_norm, y_abs = options.x_norm, options.y_abs
    if x_norm is None and x_range is not None:
        x_norm = math.sqrt(X.shape[1]) * max(abs(x_range[0]), abs(x_range[1]))
    if y_abs is None and y_range is not None:
        y_abs = max(abs(y_range[0]), abs(y_range[1]))
    if x_norm is None:
        raise InputError("x-norm", "is required (public bound on the row norm of x; or give --bounds)")
    if y_abs is None:
        raise InputError("y-abs", "is required (public bound on |y|; or give --bounds)")
    for name, v in (("x-norm", x_norm), ("y-abs", y_abs)):
        if not (math.isfinite(v) and v > 0):
            raise InputError(name, f"must be a finite number > 0 (got {v})")
    # clip each row to the public bounds (sensitivity holds only for clipped rows)
    norms = np.linalg.norm(X, axis=1)
    X = X * np.minimum(1.0, x_norm / np.maximum(norms, 1e-300))[:, None]
    y = np.clip(y, -y_abs, y_abs)
    n = X.shape[0]
    J = options.parties
    if J > n:
        raise InputError("parties", f"{J} parties for {n} rows: every party needs at least one row")

    delta = options.delta
    if delta is None:
        delta = default_delta(n)
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise InputError("delta", f"must lie in (0, 1) (got {delta})")
    if options.intercept:
        if "intercept" in feats:
            raise InputError("features", "'intercept' is reserved for the intercept coefficient")
        X = np.column_stack([np.ones(n), X])
    eps = float(options.epsilon)
    d = X.shape[1]
    seeds = ([None] * (4 * J) if options.seed is None
             else [int(s) for s in np.random.SeedSequence(options.seed).generate_state(4 * J)])
    parties = []
    for j, rows in enumerate(np.array_split(np.arange(n), J)):
        Xj, yj = X[rows], y[rows]
        stats, comp = _party_release(Xj, yj, eps, delta, mechanism, split, x_norm, y_abs, seeds[4 * j:4 * j + 4],
                                     options.intercept)
        parties.append({"n": int(len(rows)), "statistics": stats, "composition": comp})
    bounds: dict[str, Any] = {"x_norm": float(x_norm), "y_abs": float(y_abs)}
    if x_range is not None:
        bounds["x_range"] = x_range
        bounds["y_range"] = y_range
    return {"format": FORMAT, "family": FAMILY_NAME, "features": list(feats), "intercept": bool(options.intercept),
            "bounds": bounds, "n": int(n), "parties": parties,
            "description": f"linear regression, {J} data holder(s), {split} ({mechanism})"}


def split_plan(split, mechanism, eps, delta, x_norm, y_abs, d, intercept=False, sigma=None):
    """(composition, {statistic: (epsilon, delta, sensitivity, scale)}) for one party's budget; ``sigma``
    replaces the calibrated sd of Gaussian noise (the only noise whose records state it)."""
    noise = get_mechanism(mechanism)
    fixed = sigma is not None and noise.noise_shape is NoiseShape.GAUSSIAN

    def scale(e, dl, sens):
        return float(sigma) if fixed else noise.calibrated_scale(e, dl, sens)

    def joint(names):
        sens = sensitivity.joint_sensitivity(mechanism, x_norm, y_abs, d, "yty" in names, intercept)
        sc = scale(eps, delta, sens)
        return "joint", {k: (eps, delta, sens, sc) for k in names}

    def separate(names, share):
        out = {}
        for k in names:
            sens = sensitivity.separate_sensitivity(mechanism, k, x_norm, y_abs, d, intercept)
            out[k] = (eps * share, delta * share, sens, scale(eps * share, delta * share, sens))
        return "separate", out

    if split == "xtx,xty":
        return joint(("xtx", "xty"))
    if split == "xtx,xty,yty":
        return joint(("xtx", "xty", "yty"))
    if split == "halves":
        return separate(("xtx", "xty"), 0.5)
    if split == "adassp":
        return separate(("xtx", "xty"), 1.0 / 3.0)
    # min-variance: the authors' code uses the halves when sigma_s'^2 + sigma_z'^2 <= sigma_joint^2
    comp_j, plan_j = joint(("xtx", "xty"))
    comp_h, plan_h = separate(("xtx", "xty"), 0.5)
    sigma_joint = plan_j["xtx"][3]
    var_h = sum(v[3] ** 2 for v in plan_h.values())
    return (comp_h, plan_h) if var_h <= sigma_joint ** 2 else (comp_j, plan_j)


def _party_release(Xj, yj, eps, delta, mechanism, split, x_norm, y_abs, seeds, intercept=False, sigma=None):
    """One party's release: ({statistics}, composition); ``sigma``: a fixed Gaussian sd (see ``make_release``)."""
    d = Xj.shape[1]
    values = {"xtx": Xj.T @ Xj, "xty": Xj.T @ yj, "yty": np.array([float(yj @ yj)])}
    iu = np.triu_indices(d)
    composition, plan = split_plan(split, mechanism, eps, delta, x_norm, y_abs, d, intercept, sigma)
    # Gaussian records state their delta and sigma; Laplace ones are pure epsilon-DP with b = sensitivity / epsilon
    gaussian = get_mechanism(mechanism).noise_shape is NoiseShape.GAUSSIAN
    out = {}
    for k, (name, (e, dl, sens, sc)) in enumerate(plan.items()):
        rec = {"mechanism": mechanism, "epsilon": e, "sensitivity": sens}
        if gaussian:
            rec.update(delta=dl, sigma=sc)
        if name == "xtx":
            upper, sampler = draw_noise(mechanism, values["xtx"][iu], sc, seeds[k])
            M = np.zeros((d, d))
            M[iu] = upper
            value = (M + np.triu(M, 1).T).tolist()
        else:
            noisy, sampler = draw_noise(mechanism, values[name], sc, seeds[k])
            value = float(noisy[0]) if name == "yty" else noisy.tolist()
        out[name] = {"value": value, **rec, "sampler": sampler}
    if split == "adassp":
        # Wang (2018) Alg. 2: lambda_min(X'X) + sqrt(log(6/delta))/(eps/3) ||X||^2 N(0,1)
        # Wang's sigma sqrt(log(6/delta)) X^2/(eps/3) is below the analytic (eps/3, delta/3) value for
        # eps > ~1 (3.65 vs 3.97 at eps = 3, delta = 1e-5): we take the larger, so the release is private.
        x_eff = design_row_norm(x_norm, intercept)
        sig_l = max(math.sqrt(math.log(6.0 / delta)) * x_eff ** 2 / (eps / 3.0),
                    float(sigma) if sigma is not None else analytic_sigma(eps / 3.0, delta / 3.0, x_eff ** 2))
        lam = float(np.linalg.eigvalsh(values["xtx"])[0])
        lhat, sampler = draw_noise(ADASSP_MECHANISM, np.array([lam]), sig_l, seeds[3])
        out["lambda_min"] = {"value": float(lhat[0]), "mechanism": ADASSP_MECHANISM, "epsilon": eps / 3.0,
                             "delta": delta / 3.0, "sigma": sig_l, "sampler": sampler,
                             "note": "adaSSP (Wang 2018): smallest eigenvalue of X'X"}
    return out, composition
