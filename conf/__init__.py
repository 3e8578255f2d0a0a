"""Configuration tree (hydra-core): prompts, studies, models. Installed as package data."""
