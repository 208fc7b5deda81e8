"""Analysis: statistics (median CIs, bootstrap A/B, two bands), grouping, reports, renderers, plots."""
