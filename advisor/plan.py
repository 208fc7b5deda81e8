"""The old name of :mod:`advisor.pinning`, only until ``labctl/api.py`` imports ``advisor.pinning``
(delete this file then)."""

from advisor.pinning import PinningPlan, apply_plan, pinning_plan  # noqa: F401
