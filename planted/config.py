"""Where the configuration tree lives and how a study configuration is composed with hydra-core.

The ``conf/`` folder of the repository is installed as the data package ``planted.conf`` (the
shipped templates): ``prompts.yaml``, ``study/*.yaml`` and ``model/*.yaml``. A researcher's project
(:mod:`planted.project`) has its own ``conf/`` with the same layout, searched first.
:func:`compose_study` composes a study with a model through hydra's compose API (no
working-directory changes, no logging side effects), :func:`study_section` and
:func:`compose_model` compose one of the two alone.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from planted.project import Project


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
    """Absolute path of the installed configuration tree (the shipped, read-only templates)."""
    return Path(str(resources.files("planted.conf")))


def _compose(project: "Project", choices: Sequence[str], overrides: Sequence[str], what: str) -> dict[str, Any]:
    """hydra's compose of ``config.yaml`` with ``choices`` from the project's ``conf/`` first, then the shipped tree."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    shipped = conf_dir()
    primary = project.conf_dir if project.conf_dir is not None else shipped
    if not (primary / "config.yaml").is_file():  # hydra reads the primary config from the primary directory only
        raise ConfigError(f"{primary / 'config.yaml'} is missing: a project's conf/ needs its config.yaml (copy it "
                          f"from {shipped / 'config.yaml'}, or create the project with `planted init`)")
    search = [] if primary == shipped else [f"hydra.searchpath=[{shipped.as_uri()}]"]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(primary), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[*choices, *search, *overrides])
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"could not compose {what}: {exc}") from None
    finally:
        GlobalHydra.instance().clear()
    composed: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    return composed


def compose_study(study: str, model: str, overrides: Sequence[str] = (), *, project: "Project | None" = None) -> dict[str, Any]:
    """Compose ``study/<study>.yaml`` with ``model/<model>.yaml`` and any hydra overrides.

    Both are looked up in the project's ``conf/`` first (:class:`planted.project.Project`; default:
    the current directory's project), then among the shipped templates. ``study`` may also be the
    path of a study YAML file (a user's own grid); it then replaces the ``study`` group and the
    overrides are applied to the result.

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
    from omegaconf import OmegaConf

    from planted.project import Project

    project = project if project is not None else Project.find()
    if study.endswith((".yaml", ".yml")) and Path(study).is_file():
        merged = OmegaConf.merge(
            OmegaConf.create({"model": compose_model(model, project=project), "study": OmegaConf.load(study)}),
            OmegaConf.from_dotlist(list(overrides)),
        )
        composed: dict[str, Any] = OmegaConf.to_container(merged, resolve=True)  # type: ignore[assignment]
        return _checked(composed, study)
    source = project.require("study", study)
    project.require("model", model)
    composed = _compose(project, [f"study={study}", f"model={model}"], overrides,
                        f"study {study!r} with model {model!r}")
    return _checked(composed, source.describe())


def study_section(study: str, overrides: Sequence[str] = (), *, project: "Project | None" = None) -> dict[str, Any]:
    """The ``study`` section alone (checked), resolved like :func:`compose_study` but without a model."""
    from planted.project import Project

    project = project if project is not None else Project.find()
    source = project.require("study", study)
    composed = _compose(project, [f"study={study}", "~model"], overrides, f"study {study!r}")
    return _checked(composed, source.describe())["study"]


def _checked(composed: dict[str, Any], source: str) -> dict[str, Any]:
    """The composed configuration, once its study section passed :class:`~planted.study_config.StudyConfig`."""
    from planted.study_config import StudyConfig

    StudyConfig.from_dict(composed.get("study"), source)
    return composed


def compose_model(model: str, overrides: Sequence[str] = (), *, project: "Project | None" = None) -> dict[str, Any]:
    """The ``model`` section alone: ``model/<model>.yaml`` (project first, then the shipped templates)
    with overrides (``model.max_tokens=4000``).

    Raises
    ------
    ConfigError
        When the model config does not exist (the message lists the available ones) or an override
        does not apply.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from planted.project import Project

    project = project if project is not None else Project.find()
    path = project.require("model", model).path
    try:
        merged = OmegaConf.merge(OmegaConf.create({"model": OmegaConf.load(path)}), OmegaConf.from_dotlist(list(overrides)))
    except OmegaConfBaseException as exc:
        raise ConfigError(f"could not apply the overrides {list(overrides)} to model {model!r}: {exc}") from None
    composed: dict[str, Any] = OmegaConf.to_container(merged, resolve=True)  # type: ignore[assignment]
    unknown = sorted(set(composed) - {"model"})
    if unknown:
        raise ConfigError(f"overrides of a model start with 'model.', got {unknown}")
    return composed["model"]
