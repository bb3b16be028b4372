"""Imports stay light (docs/architecture.md): which heavy libraries each entry point loads, checked
by the module list of a fresh interpreter -- not by timing.  torch, matplotlib, Dask and ArviZ cost seconds
to import; pandas, xarray and scipy.stats most of a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dpposterior

SRC = str(Path(dpposterior.__file__).resolve().parents[1])
RELEASE = str(Path(dpposterior.__file__).parent / "data" / "blood_lead_release.json")
#: never on the paths below
HEAVY = ("torch", "zuko", "matplotlib", "dask", "distributed", "arviz", "xarray", "pandas", "scipy.stats")


def loaded_after(code: str, *args: str) -> set[str]:
    """The HEAVY modules loaded after running ``code`` in a fresh interpreter."""
    probe = (f"{code}\nimport json, sys\n"
             f"print('\\nLOADED', json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout.rsplit("LOADED", 1)[1]))


def test_import_dpposterior_loads_no_heavy_library():
    assert loaded_after("import dpposterior") == set()
    # nor numpy: the public names are resolved on first use
    assert loaded_after("import dpposterior, sys; assert 'numpy' not in sys.modules, 'numpy'") == set()


def test_the_public_api_loads_no_heavy_library():
    assert loaded_after("from dpposterior import infer, Model, Posterior, load_release, InferenceOptions, "
                        "release_from_csv, release_from_measurements") == set()


def test_cli_help_loads_no_heavy_library():
    code = ("import sys\nfrom dpposterior.cli import main\nfor argv in (['--help'], ['infer', '--help'], "
            "['calibrate', '--help']):\n    assert main(argv) == 0\nassert 'numpy' not in sys.modules, 'numpy'")
    assert loaded_after(code) == set()


def test_infer_command_loads_no_heavy_library(tmp_path):
    """The default infer on the bundled release, naive companion and --out included: the posterior is checked
    (dpposterior.convergence), printed and written (dpposterior.netcdf) without ArviZ, xarray or pandas."""
    code = ("import sys\nfrom dpposterior.cli import main\n"
            "assert main(['infer', sys.argv[1], '--out', sys.argv[2], '--seed', '1', '--quiet']) == 0")
    assert loaded_after(code, RELEASE, str(tmp_path / "p.nc")) == set()
    az = pytest.importorskip("arviz")
    assert set(az.from_netcdf(tmp_path / "p.nc").posterior.data_vars) == {"mu", "sigma2"}


def test_worker_preload_loads_no_heavy_library():
    assert loaded_after("import dpposterior.worker_preload") == set()


def test_worker_preload_imports_no_family_module():
    """The forkserver preloads no family module; a binomial unit then imports its own and none of the others."""
    code = ("import sys\nimport dpposterior.worker_preload\n"
            "assert not [m for m in sys.modules if m.startswith('dpposterior.families.')], 'a family'\n"
            "from dpposterior.diagnostics.calibration import calibration_unit\n"
            "calibration_unit({'family': 'binomial', 'n': 30, 'epsilon': 1.0, 'prior': None, 'draws': None,\n"
            "                  'methods': ['gibbs-ss', 'naive'], 'seed': 0, 'start': 0, 'trials': 1})\n"
            "assert 'dpposterior.families.gaussian' not in sys.modules, 'another family'")
    assert loaded_after(code) == set()


def test_worker_preload_and_a_calibration_unit_skip_scipy_spatial_and_other_families():
    """The forkserver preloads no family module and no scipy.spatial (the MMD's distances are compiled,
    diagnostics/distance_kernels.py); a binomial unit, MMD included, then imports its own family and nothing of
    the others."""
    code = ("import sys\nimport dpposterior.worker_preload\n"
            "assert not [m for m in sys.modules if m.startswith('dpposterior.families.')], 'a family'\n"
            "assert 'scipy.spatial' not in sys.modules, 'scipy.spatial preloaded'\n"
            "from dpposterior.diagnostics.calibration import calibration_unit\n"
            "out = calibration_unit({'family': 'binomial', 'n': 30, 'epsilon': 1.0, 'prior': None, 'draws': None,\n"
            "                        'methods': ['gibbs-ss', 'naive'], 'seed': 0, 'start': 0, 'trials': 1})\n"
            "assert out['mmd']['naive'] and out['mmd']['naive'][0] is not None, out['mmd']\n"
            "assert 'scipy.spatial' not in sys.modules, 'scipy.spatial'\n"
            "assert 'dpposterior.families.gaussian' not in sys.modules, 'another family'")
    assert loaded_after(code) == set()


def test_ppl_and_from_release_load_no_language():
    """dpposterior.ppl and from_release need numpy only: no JAX, NumPyro, PyMC or PyTensor until a language's
    module is imported."""
    code = ("import sys\nfrom dpposterior.ppl import from_release\nfrom_release(sys.argv[1])\n"
            "langs = [m for m in ('jax', 'numpyro', 'pymc', 'pytensor') if m in sys.modules]\nassert not langs, langs")
    assert loaded_after(code, RELEASE) == set()
