"""planted.analysis."""
