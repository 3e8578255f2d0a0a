"""Where the configuration tree lives and how a study configuration is composed with hydra-core.

The ``conf/`` folder of the repository is installed as the data package ``planted.conf``:
``prompts.yaml``, ``study/*.yaml`` and ``model/*.yaml``. :func:`compose_study` composes a study with
a model through hydra's compose API (no working-directory changes, no logging side effects).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Sequence


class ConfigError(ValueError):
    """A study, model or override that cannot be used; the message names it and the alternatives."""


def check_keys(
    data: Any, known: set[str], required: set[str], *, what: str, error: type[Exception] = ConfigError
) -> None:
    """Refuse unknown keys (a typo must not pass silently) and missing required keys of a config section.

    Raises
    ------
    error
        Naming the unknown keys (and the known ones) or the missing ones, prefixed by ``what``.
    """
    unknown = set(data) - known
    if unknown:
        raise error(f"unknown {what} keys {sorted(unknown)}; known: {', '.join(sorted(known))}")
    missing = required - set(data)
    if missing:
        raise error(f"{what} lacks {sorted(missing)}")


def conf_dir() -> Path:
    """Absolute path of the installed configuration tree."""
    return Path(str(resources.files("planted.conf")))


def compose_study(study: str, model: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Compose ``study/<study>.yaml`` with ``model/<model>.yaml`` and any hydra overrides.

    ``study`` may also be the path of a study YAML file outside the package (a user's own grid);
    it then replaces the ``study`` group and the overrides are applied to the result.

    Returns
    -------
    dict
        The resolved configuration as plain containers (``{"study": ..., "model": ...}``).

    Raises
    ------
    ConfigError
        When the study or model config does not exist (the message lists the available ones), an
        override does not apply, or the study section fails its checks (an unknown key, with the
        closest valid one; a wrong type; a value out of range: :mod:`planted.study_config`).
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    root = conf_dir()
    if study.endswith((".yaml", ".yml")) and Path(study).is_file():
        merged = OmegaConf.merge(
            OmegaConf.create({"model": compose_model(model), "study": OmegaConf.load(study)}),
            OmegaConf.from_dotlist(list(overrides)),
        )
        composed: dict[str, Any] = OmegaConf.to_container(merged, resolve=True)  # type: ignore[assignment]
        return _checked(composed, study)
    for group, name in (("study", study), ("model", model)):
        if not (root / group / f"{name}.yaml").is_file():
            available = sorted(p.stem for p in (root / group).glob("*.yaml"))
            raise ConfigError(f"unknown {group} {name!r}; available: {', '.join(available)}")
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(root), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"study={study}", f"model={model}", *overrides])
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"could not compose study {study!r} with model {model!r}: {exc}") from None
    composed = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    return _checked(composed, str(root / "study" / f"{study}.yaml"))


def _checked(composed: dict[str, Any], source: str) -> dict[str, Any]:
    """The composed configuration, once its study section passed :class:`~planted.study_config.StudyConfig`."""
    from planted.study_config import StudyConfig

    StudyConfig.from_dict(composed.get("study"), source)
    return composed


def compose_model(model: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The ``model`` section alone: ``model/<model>.yaml`` with overrides (``model.max_tokens=4000``).

    Raises
    ------
    ConfigError
        When the model config does not exist (the message lists the available ones) or an override
        does not apply.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    root = conf_dir() / "model"
    path = root / f"{model}.yaml"
    if not path.is_file():
        available = sorted(p.stem for p in root.glob("*.yaml"))
        raise ConfigError(f"unknown model {model!r}; available: {', '.join(available)}")
    try:
        merged = OmegaConf.merge(OmegaConf.create({"model": OmegaConf.load(path)}), OmegaConf.from_dotlist(list(overrides)))
    except OmegaConfBaseException as exc:
        raise ConfigError(f"could not apply the overrides {list(overrides)} to model {model!r}: {exc}") from None
    composed: dict[str, Any] = OmegaConf.to_container(merged, resolve=True)  # type: ignore[assignment]
    unknown = sorted(set(composed) - {"model"})
    if unknown:
        raise ConfigError(f"overrides of a model start with 'model.', got {unknown}")
    return composed["model"]
