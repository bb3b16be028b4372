"""docs/models.md and the README's user model run as written, and the CLI on a Model."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODEL_FILE = ROOT / "examples" / "models" / "poisson_counts.py"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_models_md_examples_run():
    namespace: dict = {}
    blocks = python_blocks(ROOT / "docs" / "models.md")
    assert len(blocks) >= 3
    for block in blocks:
        exec(compile(block, "docs/models.md", "exec"), namespace)   # noqa: S102 - our own documentation
    # Example 1: the exact posterior mean is 5.736 (tests/test_model.py), sd 0.228
    assert abs(namespace["post"].draws("lam").mean() - 5.736) < 0.05
    assert abs(namespace["post2"].draws("lam").mean() - 5.736) < 0.05
    assert abs(namespace["abc"].draws("lam").mean() - 5.736) < 0.1
    # Example 2: q around the value the release was simulated at (0.3)
    assert 0.22 < namespace["sim"].draws("q").mean() < 0.36


def test_readme_user_model_runs():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Your own model"):]
    block = python_blocks_from(section)[0]
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)   # noqa: S102
    assert namespace["post"].posterior["lam"].ndim == 2


def python_blocks_from(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_cli(*args):
    """``dpposterior ARGS`` in-process (``cli.main``: the console entry point), output captured."""
    import contextlib
    import io

    from dpposterior.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return _Result(code, out.getvalue(), err.getvalue())


def test_cli_infer_calibrate_report_on_a_model(tmp_path):
    post = tmp_path / "lam.nc"
    proc = run_cli("infer", "--model", f"{MODEL_FILE}:model", "--observed", "1137.5", "--out", post,
                   "--method", "da-mcmc", "--draws", "200", "--warmup", "100", "--chains", "2", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    import arviz as az

    idata = az.from_netcdf(post)
    assert idata.posterior["lam"].shape == (2, 200)
    assert abs(float(idata.posterior["lam"].mean()) - 5.736) < 0.15

    cal = tmp_path / "cal.json"
    proc = run_cli("calibrate", "--model", f"{MODEL_FILE}:model", "--trials", "3", "--methods", "da-mcmc",
                   "--draws", "20", "--seed", "0", "--out", cal)
    assert proc.returncode == 0, proc.stderr
    import json

    result = json.loads(cal.read_text())
    assert result["model"] == "model" and result["trials"] == 3
    assert len(result["methods"]["da-mcmc"]["ranks"]["lam"]) == 3

    for target, extra in ((post, ["--model", f"{MODEL_FILE}:model"]), (cal, [])):
        out = tmp_path / f"report-{target.stem}"
        proc = run_cli("report", target, "--out", out, *extra)
        assert proc.returncode == 0, proc.stderr
        assert (out / "report.html").exists()


def test_cli_model_errors_are_one_line(tmp_path):
    cases = [
        (["infer", "--model", "nofile.py:model", "--observed", "1", "--out", tmp_path / "x.nc"], "--model: no such file"),
        (["infer", "--model", f"{MODEL_FILE}:nothing", "--observed", "1", "--out", tmp_path / "x.nc"],
         "defines no 'nothing'"),
        (["infer", "--model", f"{MODEL_FILE}:model", "--observed", "1,abc", "--out", tmp_path / "x.nc"],
         "--observed: 'abc' is not a number"),
        (["infer", "--model", f"{MODEL_FILE}:model", "--observed", "1,2", "--out", tmp_path / "x.nc"],
         "the observed release has 2"),
        (["infer", "--out", tmp_path / "x.nc"], "release: give a release file"),
    ]
    for args, text in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and text in lines[0], (args, proc.stderr)
    assert np.isfinite(1.0)
