"""TP controls: a correct server at the candidate's attention TP, so that TP rounding is part of the floor.

Why: a PD deployment whose prefill or decode runs another attention-TP split than the reference computes
with other partial sums and rounds them otherwise; against a colocated TP1 reference a *clean* prefill
TP1 -> decode TP2 differs at many positions (issue 21: 3 of 3 clean runs failed under GPU-like numerics).
That difference is the split's, not the transfer's, and the only way to know its size is to measure it on
a server known to be correct at that split. SGLang's own parity kits do the same: `reference_parallel_args
= ["--tp-size", "2"]` ("changing TP can change the first sampled token").

Which TPs: the attention TP (`tp_size`, divided by `dp_size` under `enable_dp_attention`) of the servers that
compute the prompt (prefill) and the generated tokens (decode), read from `/server_info`. When the
candidate's pair differs from the reference's, a control runs at each of the candidate's TPs that the
reference (if colocated) does not already run at.

Where they come from: `--tp-control URL` (servers the user started, e.g. SGLang colocated at TP 2), else —
when the reference is pdctl's reference engine — parity starts one colocated reference-engine server per
TP with the reference's own flags (model, page size, chunking, context, seed, numerics), on a free port, for
the duration of the run. Otherwise the run says that TP rounding is not in the floor.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.errors import CheckFailed, UserError
from pdctl.executors.logtail import tail_lines
from pdctl.extras import PROCESS_NEEDS, first_missing
from pdctl.parity.runner import Control
from pdctl.parity.splits import Split, control_tp, discover_split
from pdctl.target import Target, check_reachable, get_json, target_from_url

# flags of the reference engine copied from the reference's /server_info onto a launched control
_COPIED = ("page_size", "kv_cache_dtype", "kv_layout", "max_total_tokens", "swa_max_total_tokens", "context_length",
           "random_seed", "chunked_prefill_size", "num_threads", "schedule_conservativeness")
_BARE = ("disable_hybrid_swa_memory", "disable_radix_cache")
LOG_TAIL = 30  # lines of a failed control's log in the error


def needed_tps(candidate: Split, reference: Split) -> list[int]:
    """TPs a control must run at: none when the splits match (or are unknown), else the candidate's TPs
    that a colocated reference does not already run at."""
    if not (candidate.known and reference.known) or candidate == reference:
        return []
    covered = {reference.prefill} if reference.prefill == reference.decode else set()
    return sorted({t for t in (candidate.prefill, candidate.decode) if t is not None} - covered)


@dataclass
class TPInfo:
    """What the JSON says about TP: the splits, the TPs needing a control, the controls used, a note, and what
    the floor still lacks (`missing`: TPs no control covers; `unknown`: why a split is unknown)."""

    candidate: Split
    reference: Split
    needed: list[int]
    controls: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    servers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unknown: str = ""  # why the splits are unknown ("" when both are known or a control was given anyway)
    missing: list[int] = field(default_factory=list)

    @property
    def calibrated(self) -> bool:
        """Whether the floor has every control the comparison needs (else a difference may be TP rounding)."""
        return not self.unknown and not self.missing

    def calibrate_with(self) -> str:
        """What would calibrate the floor, in the user's terms (empty when calibrated)."""
        if self.calibrated:
            return ""
        tps = self.missing or sorted({t for t in self.candidate.as_list() if t is not None})
        at = f"attention TP {', '.join(map(str, tps))}" if tps else "the candidate's attention TP"
        return (f"pass --tp-control URL (a correct colocated server at {at}: pdctl launch a `mode: colocated` "
                f"topology with that tp, or SGLang with --tp-size), or give the reference as --reference-topology "
                "FILE (its split is then known, and for the reference engine parity starts the TP controls itself)")

    def document(self) -> dict[str, Any]:
        return {"candidate": self.candidate.as_list(), "reference": self.reference.as_list(), "needed": self.needed,
                "controls": self.controls, "note": self.note or None, "servers": self.servers,
                "calibrated": self.calibrated, "missing": self.missing, "unknown": self.unknown or None,
                "calibrate_with": self.calibrate_with() or None}


def control_argv(info: dict[str, Any], *, tp: int, numerics: str | None, port_file: Path) -> list[str]:
    """`python -m pdctl.reference` at TP with the reference's flags (its /server_info), colocated, port 0."""
    model = info.get("model_path")
    if not isinstance(model, str) or not model:
        raise UserError("cannot start a TP control: the reference's /server_info has no model_path")
    argv = [sys.executable, "-m", "pdctl.reference", "--model-path", model, "--role", "colocated", "--tp", str(tp),
            "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file), "--log-level", "warning"]
    for key in _COPIED:
        if info.get(key) is not None:
            argv += ["--" + key.replace("_", "-"), str(info[key])]
    argv += ["--" + key.replace("_", "-") for key in _BARE if info.get(key)]
    value = numerics or info.get("numerics")
    if isinstance(value, str):
        argv += ["--numerics", value]
    return argv


@contextlib.contextmanager
def launched_control(info: dict[str, Any], *, tp: int, numerics: str | None, timeout: float) -> Iterator[Target]:
    """A colocated reference-engine server at TP for the block; its log tail in the error if it fails."""
    missing = first_missing(PROCESS_NEEDS["pdctl.reference"], f"a TP{tp} control (pdctl.reference)")
    if missing is not None:
        raise missing
    workdir = Path(tempfile.mkdtemp(prefix=f"pdctl-parity-tp{tp}-control-"))
    port_file, log_path = workdir / "ports.json", workdir / "server.log"
    argv = control_argv(info, tp=tp, numerics=numerics, port_file=port_file)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env.pop("PDCTL_ENABLE_TEST_HOOKS", None)  # a control is a correct server, whatever the caller's environment
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        url = _wait_up(proc, port_file, log_path, tp=tp, timeout=timeout)
        yield target_from_url(url)
    finally:
        _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_up(proc: subprocess.Popen, port_file: Path, log_path: Path, *, tp: int, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CheckFailed(f"the TP{tp} control (pdctl.reference) exited with {proc.returncode}",
                              detail=tail_lines(log_path, LOG_TAIL))
        if port_file.exists():
            url = f"http://127.0.0.1:{int(json.loads(port_file.read_text())['port'])}"
            if get_json(url, "/server_info") is not None:
                return url
        time.sleep(0.2)
    raise CheckFailed(f"the TP{tp} control (pdctl.reference) was not up after {timeout:g} s",
                      detail=tail_lines(log_path, LOG_TAIL))


def _stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            continue


def _given(info: TPInfo, urls: tuple[str, ...]) -> list[Control]:
    """--tp-control URLs (a server, or a router in front of one): their TPs found as any target's are."""
    controls = []
    for url in urls:
        check_reachable(url, "--tp-control")
        tp, target = control_tp(url)
        controls.append(Control(f"tp{tp} control" if tp else f"control {url}", target))
        info.controls.append({"tp": tp, "url": url, "source": "given"})
    covered = {c["tp"] for c in info.controls}
    if None in covered:  # the user's word that it is the right control: TP unknown, trusted
        info.note = "a --tp-control's TP could not be read: trusted to be at the TP the candidate needs"
        return controls
    info.missing = [t for t in info.needed if t not in covered]
    if not (info.candidate.known and info.reference.known):
        info.note = f"the TP splits are unknown ({info.unknown}): the floor uses the given --tp-control"
        info.unknown = ""  # the user named the control the comparison needs
    return controls


@contextlib.contextmanager
def tp_controls(candidate: Target, reference: Target, *, urls: tuple[str, ...] = (), enabled: bool = True,
                numerics: str | None = None, timeout: float = 600.0) -> Iterator[tuple[list[Control], TPInfo]]:
    """The TP controls for this candidate/reference pair (given, launched, or none) and what to report: a
    control that is needed but cannot be had leaves the floor uncalibrated (TPInfo.calibrated), it never
    stops the run."""
    cand, ref = discover_split(candidate), discover_split(reference)
    reasons = [f"{name}: {found.unknown_because}" for name, found in (("candidate", cand), ("reference", ref))
               if found.unknown_because]
    info = TPInfo(cand.split, ref.split, needed_tps(cand.split, ref.split),
                  servers={"candidate": cand.servers, "reference": ref.servers}, unknown="; ".join(reasons))
    if urls:
        yield _given(info, urls), info
        return
    if info.unknown:
        info.note = f"the TP splits are unknown ({info.unknown}): no TP control"
        yield [], info
        return
    info.missing = list(info.needed)
    if not info.needed:
        yield [], info
        return
    if not enabled:
        info.note = "TP controls disabled (--no-tp-control): TP rounding is not in the floor"
        yield [], info
        return
    if (ref.info or {}).get("engine") != "pdctl-reference":
        info.note = (f"the candidate's attention TP {cand.split.as_list()} differs from the reference's "
                     f"{ref.split.as_list()} and no TP control was given: TP rounding is not in the floor")
        yield [], info
        return
    value = numerics or (cand.info or {}).get("numerics")
    with contextlib.ExitStack() as stack:
        controls = []
        for tp in info.needed:
            try:
                target = stack.enter_context(launched_control(ref.info or {}, tp=tp, numerics=value, timeout=timeout))
            except CheckFailed as exc:  # the control, not the candidate, failed: the floor lacks it
                info.note = f"{exc.message}: TP{tp} rounding is not in the floor" + (
                    f" ({exc.detail.splitlines()[-1]})" if exc.detail and exc.detail.strip() else "")
                continue
            controls.append(Control(f"tp{tp} control", target))
            info.controls.append({"tp": tp, "url": target.url, "source": "launched", "numerics": value})
            info.missing.remove(tp)
        yield controls, info
