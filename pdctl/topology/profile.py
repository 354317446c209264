"""The cluster profile: what belongs to a cluster, not to a deployment (srtctl's `srtslurm.yaml`).

A topology names a model and a container by what they are (`model.path: gpt-oss-120b`, `engine.container.image:
sglang-0.5.23`) and leaves out the Slurm account and partition; the profile of the cluster it runs on says
where those are and what the cluster needs, so one topology file moves between clusters unchanged:

    slurm:       {account: ..., partition: ..., time_limit: ..., sbatch_directives: [...], segment: true, ...}
    containers:  {alias: image}          # registry reference or enroot .sqsh file
    models:      {alias: path}           # model directory (or HF id)
    env:         {VAR: value}            # defaults for engine.env

Found as `--cluster FILE`, else $PDCTL_CLUSTER, else `pdctl-cluster.yaml` in the working directory or a
parent (`--cluster none`: no profile). It is applied to the topology document before validation, like
`--set` (pdctl.topology.overrides): the topology's own values win, an alias resolves to the profile's value,
and what was filled in or resolved is recorded (`Resolution`) for the render, state.json and lock.json.
An unknown alias is bad input (exit 2) naming the profile file and the aliases it has.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from pdctl.errors import UserError
from pdctl.topology.base import EnvMap, Section
from pdctl.topology.cluster import SlurmConfig
from pdctl.topology.validation import did_you_mean, sorted_failure, validation_lines
from pdctl.topology.yamltree import MAX_FILE_BYTES, Positions, parse_yaml, too_big

PROFILE_ENV = "PDCTL_CLUSTER"
PROFILE_NAME = "pdctl-cluster.yaml"
NO_PROFILE = "none"
# List-valued slurm keys: the profile's entries come first, then the topology's (both apply).
_SLURM_LISTS = ("sbatch_directives", "srun_options", "setup", "job_pip_args")
_IMAGE_MARKS = ("/", ":", "#", "@")
_IMAGE_SUFFIXES = (".sqsh", ".sif", ".tar")


class ProfileSlurm(SlurmConfig):
    """The profile's Slurm defaults: any key of a topology's `slurm:` section (account, partition,
    time_limit, extra #SBATCH lines, segment, the job's interpreter...). `exclusive` has no default here: a
    profile that does not say leaves the topology's."""

    exclusive: bool | None = Field(None, description="--exclusive default for this cluster's jobs.")  # type: ignore[assignment]


class ClusterProfile(Section):
    """One cluster's facts (see the module docstring)."""

    name: str | None = Field(None, description="The cluster's name (shown in records).")
    slurm: ProfileSlurm | None = Field(None, description="Defaults for a topology's slurm: section.")
    containers: dict[str, str] = Field(default_factory=dict, description="Container aliases: alias -> image.")
    models: dict[str, str] = Field(default_factory=dict, description="Model aliases: alias -> path (or HF id).")
    env: EnvMap = Field(default_factory=dict, description="Defaults for engine.env.")



@dataclass
class ProfileUse:
    """A profile applied to one topology: the file, and what it filled in or resolved (key -> record)."""

    path: Path
    name: str | None
    resolved: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.name, "resolved": copy.deepcopy(self.resolved)}


def find_profile(option: str | None, cwd: Path | None = None) -> Path | None:
    """The profile file to use: `--cluster FILE` (OPTION), else $PDCTL_CLUSTER, else pdctl-cluster.yaml in CWD
    or a parent; None when there is none or OPTION / the variable says `none`."""
    chosen = option if option is not None else os.environ.get(PROFILE_ENV) or None
    if chosen is not None:
        if chosen.strip().lower() == NO_PROFILE:
            return None
        path = Path(chosen).expanduser()
        how = "--cluster" if option is not None else f"${PROFILE_ENV}"
        if not path.is_file():
            raise UserError(f"{how} {chosen}: no such cluster profile file")
        return path.resolve()
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / PROFILE_NAME
        if candidate.is_file():
            return candidate
    return None


def load_profile(path: Path) -> ClusterProfile:
    """Read and validate a profile file; UserError (exit 2) naming file:line:col and the key."""
    source = str(path)
    try:
        raw = path.read_bytes()[: MAX_FILE_BYTES + 1]
    except OSError as exc:
        raise UserError(f"{source}: cannot read the cluster profile: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise too_big(source, len(raw))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{source}: not UTF-8 text (byte {exc.start}); expected a YAML cluster profile") from None
    data, positions = parse_yaml(text, source, text_paths=frozenset({("slurm", "time_limit")}))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping (slurm:, containers:, models:, env:) at the top level")
    try:
        return ClusterProfile.model_validate(data)
    except ValidationError as exc:
        raise sorted_failure(validation_lines(exc, source, positions, root=ClusterProfile)) from None


def looks_like_image(value: str) -> bool:
    """A registry reference (has a registry, repository or tag: '/', ':', '@', '#') or an image file."""
    return any(m in value for m in _IMAGE_MARKS) or value.endswith(_IMAGE_SUFFIXES)


def looks_like_path(value: str) -> bool:
    """A filesystem path or an HF repo id ('org/name'), not a bare alias."""
    return "/" in value or value.startswith((".", "~"))


def _unknown(profile_path: Path, what: str, key: str, value: str, aliases: dict[str, str], where: str) -> UserError:
    have = ", ".join(sorted(aliases)) if aliases else "none"
    return UserError(f"{where}{key}: {value!r} is not a {what} alias of the cluster profile {profile_path} "
                     f"({what} aliases: {have}){did_you_mean(value, aliases)}; write the alias as the profile "
                     f"spells it, add it to the profile's {'containers' if what == 'container' else 'models'}:, "
                     f"or give the full {'image reference' if what == 'container' else 'path'}")


def _resolve_alias(use: ProfileUse, key: str, value: Any, aliases: dict[str, str], what: str, plain: bool,
                   where: str) -> Any:
    """VALUE, or the profile's value for the alias VALUE (recorded in USE); PLAIN: VALUE is literal as written.
    WHERE: 'file:line:col: ' of the value, for the error."""
    if not isinstance(value, str):
        return value
    if value in aliases:
        use.resolved[key] = {"alias": value, "value": aliases[value], "from": "profile"}
        return aliases[value]
    if aliases and not plain:
        raise _unknown(use.path, what, key, value, aliases, where)
    return value


def apply_profile(data: Any, profile: ClusterProfile, path: Path, source: str = "<data>",
                  positions: Positions | None = None) -> tuple[Any, ProfileUse]:
    """DATA (a parsed topology document) with PROFILE applied, as a new document, and what was applied.

    slurm: the profile's keys fill those the topology's slurm: section leaves out (list keys: the profile's
    entries, then the topology's); only a topology that runs on Slurm (has slurm:, or a node without host) gets
    them. env: defaults under engine.env. containers / models: engine.container.image and model.path name an
    alias, resolved here; a bare word that is no alias is an error when the profile has aliases of that kind."""
    use = ProfileUse(path, profile.name)
    positions = positions or Positions()

    def where(*key: str) -> str:
        pos = positions.value_at(key)
        label = getattr(pos, "label", None)
        return f"{label}: " if label else f"{source}:{pos[0]}:{pos[1]}: " if pos else f"{source}: "

    if not isinstance(data, dict):
        return data, use
    out = copy.deepcopy(data)
    _apply_slurm(out, profile, use)
    engine = out.get("engine")
    if profile.env:
        if engine is None:
            engine = out["engine"] = {}
        if isinstance(engine, dict):
            env = engine.get("env") if isinstance(engine.get("env"), dict) else {}
            for name, value in profile.env.items():
                if name not in env:
                    use.resolved[f"engine.env.{name}"] = {"value": value, "from": "profile"}
            engine["env"] = {**profile.env, **env}
    container = engine.get("container") if isinstance(engine, dict) else None
    if isinstance(container, dict) and "image" in container:
        image = container["image"]
        plain = isinstance(image, str) and looks_like_image(image)
        container["image"] = _resolve_alias(use, "engine.container.image", image, profile.containers, "container",
                                            plain, where("engine", "container", "image"))
    model = out.get("model")
    if isinstance(model, dict) and "path" in model:
        value = model["path"]
        plain = isinstance(value, str) and looks_like_path(value)
        model["path"] = _resolve_alias(use, "model.path", value, profile.models, "model", plain,
                                       where("model", "path"))
    return out, use


def _runs_on_slurm(data: dict[str, Any]) -> bool:
    nodes = data.get("nodes")
    hostless = isinstance(nodes, list) and any(isinstance(n, dict) and n.get("host") is None for n in nodes)
    return "slurm" in data or hostless


def _apply_slurm(out: dict[str, Any], profile: ClusterProfile, use: ProfileUse) -> None:
    if profile.slurm is None or not _runs_on_slurm(out):
        return
    given = profile.slurm.model_dump(exclude_unset=True)
    section = out.get("slurm")
    if section is None:
        section = out["slurm"] = {}
    if not isinstance(section, dict):
        return  # the loader says what is wrong with it
    for key, value in given.items():
        if key in _SLURM_LISTS:
            mine = section.get(key)
            section[key] = list(value) + (list(mine) if isinstance(mine, list) else [] if mine is None else [mine])
            if value:
                use.resolved[f"slurm.{key}"] = {"value": list(value), "from": "profile", "merged": True}
        elif key not in section:
            section[key] = copy.deepcopy(value)
            use.resolved[f"slurm.{key}"] = {"value": copy.deepcopy(value), "from": "profile"}


@dataclass(frozen=True)
class LoadedProfile:
    """A cluster profile read from its file (what the loader applies)."""

    path: Path
    profile: ClusterProfile


def open_profile(option: str | None, cwd: Path | None = None) -> LoadedProfile | None:
    """The profile `--cluster OPTION` / $PDCTL_CLUSTER / pdctl-cluster.yaml names, loaded (None: no profile)."""
    path = find_profile(option, cwd)
    return LoadedProfile(path, load_profile(path)) if path is not None else None


__all__ = ["NO_PROFILE", "PROFILE_ENV", "PROFILE_NAME", "ClusterProfile", "LoadedProfile", "ProfileUse",
           "apply_profile", "find_profile", "load_profile", "open_profile"]
