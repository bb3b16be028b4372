"""Diagnostics: simulation-based calibration, MMD, C2ST and friends."""
