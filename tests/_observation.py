"""The observation-model tests' spy on the one packer: every ``ObservationModel.pack`` call an engine makes."""

from __future__ import annotations


def spy_on_pack(monkeypatch, variables: bool = False) -> list:
    """Patch ``ObservationModel.pack`` to record each call as (family, method, sorted draw names, sorted
    predictive names) -- or, with ``variables``, (family, method, the packing model's variable names) -- and pass
    it through; returns the list the calls are appended to."""
    from dpposterior.observation import ObservationModel

    calls = []
    pack = ObservationModel.pack

    def spy(self, draws, method_name, **kwargs):
        calls.append((self.family, method_name, tuple(v.name for v in self.variables)) if variables else
                     (self.family, method_name, sorted(draws), sorted(kwargs.get("posterior_predictive") or {})))
        return pack(self, draws, method_name, **kwargs)

    monkeypatch.setattr(ObservationModel, "pack", spy)
    return calls
