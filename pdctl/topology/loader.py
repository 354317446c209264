"""Load a topology file: YAML -> validated `Topology`, every error naming file:line:col and the key path.

Errors are collected (up to MAX_ERRORS) so a user fixes a file in one pass, and each says what was expected
and, for misspelt keys or values, what was probably meant. Everything here raises `UserError` (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pdctl.errors import UserError
from pdctl.topology.model import Topology, TopologyFile
from pdctl.topology.overrides import apply_overrides
from pdctl.topology.profile import LoadedProfile, apply_profile
from pdctl.topology.sections import MODE_SECTIONS
from pdctl.topology.sweep import SWEEP_KEY, Variant, without_sweep
from pdctl.topology.validation import (
    MAX_ERRORS,
    SLURM_KEY_HINTS,
    Located,
    describe,
    did_you_mean,
    failure,
    model_at,
    sorted_failure,
    validation_lines,
)
from pdctl.topology.yamltree import (
    MAX_FILE_BYTES,
    PathKey,
    Positions,
    format_path,
    located,
    parse_yaml,
    too_big,
)

# Plain scalars kept as written: YAML 1.1 reads an unquoted 4:00:00 as the integer 14400 (base 60).
TEXT_PATHS: frozenset[PathKey] = frozenset({("slurm", "time_limit")})


def _mode_problems(data: dict[Any, Any], source: str, positions: Positions) -> list[Located]:
    """The role sections must be the mode's: prefill: + decode: (pd), or colocated: alone (colocated).

    Checked on the data as written (key presence, so `prefill: null` counts as written) because whether a
    section is required or forbidden depends on another key, which pydantic's per-field errors cannot say.
    An unknown `mode` value is pydantic's error; then nothing is checked here.
    """
    mode = data.get("mode", "pd")
    if not isinstance(mode, str) or mode not in MODE_SECTIONS:
        return []
    out: list[Located] = []
    wanted = MODE_SECTIONS[mode]
    mode_words = "mode: colocated" if mode == "colocated" else (
        "mode: pd" + ("" if "mode" in data else ", the default"))
    for section in wanted:
        if section not in data:
            if mode == "pd":  # the message of any other missing required key
                pos = positions.value_at(())
                msg = f"required key {section!r} missing in (top level)"
            else:
                pos = positions.value_at(("mode",))
                msg = f"required key {section!r} missing ({mode_words} describes its servers in a {section}: section)"
            out.append((pos or (0, 0), located(source, pos, (section,), msg)))
        elif data[section] is None:
            pos = positions.value_at((section,))
            out.append((pos or (0, 0), located(source, pos, (section,), "expected a mapping, got null")))
    others = [s for m, sections in MODE_SECTIONS.items() if m != mode for s in sections]
    for section in others:
        if section not in data:
            continue
        pos = positions.key_at((section,))
        if mode == "colocated":
            msg = ("not allowed with mode: colocated (one colocated: section describes the servers); "
                   "remove prefill: / decode:, or set mode: pd")
        else:
            msg = (f"only allowed with mode: colocated (this file is {mode_words}); set mode: colocated and "
                   "remove prefill: / decode:, or remove colocated:")
        out.append((pos or (0, 0), located(source, pos, (section,), msg)))
    return out


def _cross_reference(raw: TopologyFile, source: str, positions: Positions) -> list[str]:
    """Checks across sections that make a file invalid input (not compatibility findings)."""
    problems: list[str] = []

    def add(path: PathKey, message: str, key: bool = False) -> None:
        pos = positions.key_at(path) if key else positions.value_at(path)
        problems.append(located(source, pos, path, message))

    names: dict[str, int] = {}
    for i, node in enumerate(raw.nodes):
        if node.name in names:
            add(("nodes", i, "name"), f"duplicate node name {node.name!r} (also nodes[{names[node.name]}])")
        else:
            names[node.name] = i
    for role_name in MODE_SECTIONS[raw.mode]:
        role = getattr(raw, role_name)
        seen: set[str] = set()
        for k, node_name in enumerate(role.nodes):
            if node_name not in names:
                add((role_name, "nodes", k), f"unknown node {node_name!r}{did_you_mean(node_name, names)}"
                    f" (nodes: {', '.join(names)})")
            elif node_name in seen:
                add((role_name, "nodes", k), f"node {node_name!r} listed twice")
            seen.add(node_name)
        if role.enable_dp_attention and role.tp % role.dp != 0:
            add((role_name, "dp"),
                f"dp ({role.dp}) must divide tp ({role.tp}) when enable_dp_attention is true")
        if role.port + role.replicas - 1 > 65535:
            add((role_name, "port"), f"ports {role.port}..{role.port + role.replicas - 1} of "
                f"{role.replicas} replicas exceed 65535")
    last_bootstrap = raw.transfer.bootstrap_port + (raw.prefill.replicas - 1 if raw.prefill else 0)
    if raw.prefill is not None and last_bootstrap > 65535:
        add(("transfer", "bootstrap_port"), f"bootstrap ports up to {last_bootstrap} "
            f"({raw.prefill.replicas} prefill replicas) exceed 65535")
    problems += _host_problems(raw, add)
    if raw.slurm is not None and raw.slurm.gres is not None and raw.slurm.gpus_per_node is not None:
        add(("slurm", "gpus_per_node"), "set gres or gpus_per_node, not both (both ask Slurm for GPUs)", key=True)
    if raw.router.node is not None and raw.router.node not in names:
        add(("router", "node"), f"unknown node {raw.router.node!r}{did_you_mean(raw.router.node, names)}"
            f" (nodes: {', '.join(names)})")
    return problems


def _host_problems(raw: TopologyFile, add: Any) -> list[str]:
    """A node may leave host out only with a slurm: section (the job assigns it a node) or a kubernetes:
    section (the node is a node type: the scheduler places the pods), and then has no ssh: and no
    advertise_host (the address is read on the node it is given). Reports through ADD; returns []."""
    assigner = "Slurm" if raw.slurm is not None else "Kubernetes" if raw.kubernetes is not None else None
    for i, node in enumerate(raw.nodes):
        if node.host is not None:
            continue
        if assigner is None:
            add(("nodes", i), "required key 'host' missing (only with a slurm: or kubernetes: section may a node "
                "leave host out: the Slurm job assigns it one of its nodes, or Kubernetes schedules its pods)")
        elif node.ssh is not None:
            how = "srun" if assigner == "Slurm" else "its pods"
            add(("nodes", i, "ssh"), f"a node without host (assigned by {assigner}) is reached through {how}, "
                "not ssh", key=True)
        elif node.advertise_host is not None:
            where = ("slurm.network_interface chooses the interface" if assigner == "Slurm"
                     else "a pod advertises its own address")
            add(("nodes", i, "advertise_host"), f"a node without host (assigned by {assigner}) advertises the "
                f"address read on the node it is given ({where})", key=True)
    return []


def build_topology(data: Any, source: str = "<data>", positions: Positions | None = None,
                   source_path: Path | None = None, overrides: tuple[str, ...] | list[str] = (), *,
                   profile: LoadedProfile | None = None, variant: Variant | None = None) -> Topology:
    """Validate already-parsed data (e.g. a dict built by a test) into a Topology; UserError on bad input.
    OVERRIDES: `--set KEY=VALUE` applied to DATA first (pdctl.topology.overrides); their errors name them.
    VARIANT: one variant of the document's `sweep:` (pdctl.topology.sweep), applied after OVERRIDES; a
    document with a sweep and no VARIANT is refused (the commands that take sweeps expand them). PROFILE: the
    cluster profile (pdctl.topology.profile), applied last."""
    positions = positions or Positions()
    if overrides:
        data = apply_overrides(data, overrides, positions)
    if variant is not None:
        data = apply_overrides(without_sweep(data), variant.overrides(), positions, label=f"sweep variant {variant.name}:")
    elif isinstance(data, dict) and data.get(SWEEP_KEY) is not None:
        raise UserError(located(source, positions.key_at((SWEEP_KEY,)), (SWEEP_KEY,),
                                "this topology is a sweep: check-compat and launch take it (one verdict and one "
                                "run per variant); for one variant here, drop the sweep and set its values: "
                                "--set sweep=null --set KEY=VALUE ..."))
    use = None
    if profile is not None:
        data, use = apply_profile(data, profile.profile, profile.path, source, positions)
    if not isinstance(data, dict):
        pos = positions.value_at(())
        raise UserError(located(source, pos, None, f"expected a mapping at the top level "
                                                   f"(name:, model:, nodes:, ...), got {describe(data)}"))
    problems_found = _mode_problems(data, source, positions)
    try:
        raw = TopologyFile.model_validate(data)
    except ValidationError as exc:
        raise sorted_failure(validation_lines(exc, source, positions) + problems_found) from None
    if problems_found:
        raise sorted_failure(problems_found)
    problems = _cross_reference(raw, source, positions)
    if problems:
        raise failure(problems)
    changed = bool(overrides) or variant is not None or use is not None
    return Topology.from_file_model(raw, source_path=source_path, overrides=tuple(overrides),
                                    document=data if changed else None,
                                    profile=use.to_json() if use is not None else None,
                                    variant=variant.to_json() if variant is not None else None)


def load_topology_text(text: str, source: str = "<string>") -> Topology:
    """Load a topology from YAML text; `source` names it in error messages."""
    data, positions = parse_yaml(text, source, text_paths=TEXT_PATHS)
    return build_topology(data, source, positions)


def read_document(path: str | Path) -> tuple[Any, Positions, str]:
    """A topology file's parsed document, its positions and its name for messages (UserError on a missing,
    unreadable, oversized or non-YAML file)."""
    path = Path(path)
    source = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES and path.is_file():  # before reading it: a huge file must not be read at all
            raise too_big(source, size)
        with path.open("rb") as fh:  # bounded also for pipes and /dev/stdin, whose size stat cannot tell
            raw_bytes = fh.read(MAX_FILE_BYTES + 1)
        if len(raw_bytes) > MAX_FILE_BYTES:
            raise too_big(source, len(raw_bytes))
    except FileNotFoundError:
        raise UserError(f"{source}: no such topology file") from None
    except IsADirectoryError:
        raise UserError(f"{source}: is a directory, expected a topology YAML file") from None
    except OSError as exc:
        raise UserError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{source}: not UTF-8 text (byte {exc.start}); expected a YAML file") from None
    data, positions = parse_yaml(text, source, text_paths=TEXT_PATHS)
    return data, positions, source


def load_topology(path: str | Path, overrides: tuple[str, ...] | list[str] = (), *,
                  profile: LoadedProfile | None = None) -> Topology:
    """Load and validate a topology file; raises UserError('file:line:col: key.path: expected ...').
    OVERRIDES: `--set KEY=VALUE` entries applied before validation (errors: '--set KEY=VALUE: key.path: ...');
    PROFILE: the cluster profile (pdctl.topology.profile.open_profile) applied after them."""
    data, positions, source = read_document(path)
    return build_topology(data, source, positions, source_path=Path(path).resolve(), overrides=overrides,
                          profile=profile)


__all__ = ["MAX_ERRORS", "SLURM_KEY_HINTS", "build_topology", "describe", "did_you_mean", "format_path",
           "load_topology", "load_topology_text", "model_at", "read_document"]
