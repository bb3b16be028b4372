"""Alias of :mod:`dpposterior.sbi.smc_abc` (the SBI engines live in ``dpposterior.sbi``; docs/architecture.md).

Kept so that code importing the old path gets the same module object, not a copy."""

import sys

from ..sbi import smc_abc as _module

sys.modules[__name__] = _module
