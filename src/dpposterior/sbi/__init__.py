"""Simulation-based inference from DP releases (Xiong, Ju & Zhang): the model interface.

A user model is a :class:`dpposterior.Model` (docs/models.md); this package holds its internal
SBI view (:class:`SimulatorModel`) and the priors of the simulator families.  The engines
are :func:`dpposterior.sbi.smc_abc.run_smc_abc`,
:func:`dpposterior.sbi.sppe.run_sppe` and :func:`dpposterior.sbi.sple.run_sple`.
"""

from .model import (DirichletALRPrior, GaussianPrior, NoiseIgnored, SimulatorModel, alr_to_simplex,
                    simplex_to_alr)

__all__ = ["SimulatorModel", "GaussianPrior", "DirichletALRPrior", "NoiseIgnored", "alr_to_simplex",
           "simplex_to_alr"]
