"""Measuring: one trial, a run session in the store, sweeps."""
