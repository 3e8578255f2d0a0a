"""planted.baselines."""
