"""planted.agents."""
