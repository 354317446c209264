"""A rehearsal pair: a prefill-side and a decode-side driver (two processes in SGLang's interpreter) that run
one case after another, and the merged outcome of each case.

Runs in pdctl's interpreter. One pair serves many cases (a test matrix, bench rounds): each case builds fresh
ranks in both drivers, each request is moved once per `transfer`. A side that fails makes pdctl abort the
other's wait, so a failed case costs seconds, not SGLang's timeouts; the outcome names the earliest stage
either side failed at, with SGLang's own message.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from pdctl.sglang_stack.launcher import DriverProcess, Interpreter, driver_env
from pdctl.sglang_stack.spec import SideSpec
from pdctl.sglang_stack.verdict import first_stage

READY_TIMEOUT_S = 600.0  # SGLang's import: 6.5 s alone, much more on a loaded 2-core machine
SETUP_SLACK_S = 300.0  # pools, managers, registration (a big VRAM pool, a slow NIXL backend)


class Rehearsal:
    """Two drivers and the cases run through them."""

    def __init__(self, interpreter: Interpreter | str, *, prefill_host: str = "127.0.0.1",
                 decode_host: str = "127.0.0.1", timeout: float = 60.0, env: dict[str, str] | None = None,
                 popen: dict[str, Any] | None = None, pythons: dict[str, str] | None = None) -> None:
        """INTERPRETER runs both drivers (PYTHONS: per side instead, e.g. two nodes' engine Pythons); POPEN:
        per side, how to start a driver on its node (preflight: the node's executor), else a local process."""
        python = interpreter.python if isinstance(interpreter, Interpreter) else interpreter
        pythons = pythons or {}
        self.timeout = timeout
        popen = popen or {}
        self.prefill = DriverProcess(pythons.get("prefill", python), "prefill",
                                     driver_env(prefill_host, timeout, env), popen=popen.get("prefill"))
        self.decode = DriverProcess(pythons.get("decode", python), "decode",
                                    driver_env(decode_host, timeout, env), popen=popen.get("decode"))
        self.ready: dict[str, Any] = {}
        self.case: str | None = None  # the case whose processes are alive (ended before the next setup)
        for name, driver in (("prefill", self.prefill), ("decode", self.decode)):
            hello = driver.recv(READY_TIMEOUT_S)
            if not hello.get("ready"):
                self.close()
                raise RuntimeError(f"SGLang {name} driver did not start: {hello.get('error')}")
            self.ready[name] = hello
        self.sglang = str(self.ready["prefill"].get("sglang"))

    def setup(self, pre: SideSpec, dec: SideSpec) -> dict[str, Any]:
        """Build both sides' ranks for a new case (the previous case's processes end first);
        {"ok": False, "stage": "model load", ...} on failure."""
        self.end()
        case = self.case = uuid.uuid4().hex[:12]
        self.prefill.send({"cmd": "setup", "case": case, "spec": pre.to_dict()})
        got = self.prefill.recv(self.timeout + SETUP_SLACK_S)
        if not got.get("ok"):
            return {"case": case, "ok": False, "stage": got.get("stage") or "model load", "side": "prefill",
                    "error": got.get("error")}
        dec = replace(dec, bootstrap_port=int(got["bootstrap_port"]), bootstrap_host=pre.bootstrap_host)
        self.decode.send({"cmd": "setup", "case": case, "spec": dec.to_dict()})
        dgot = self.decode.recv(self.timeout + SETUP_SLACK_S)
        if not dgot.get("ok"):
            return {"case": case, "ok": False, "stage": dgot.get("stage") or "model load", "side": "decode",
                    "error": dgot.get("error")}
        return {"case": case, "ok": True, "prefill": got, "decode": dgot}

    def transfer(self, case: str, room: int) -> dict[str, Any]:
        """Move one request through both sides; the merged outcome (see `merge`)."""
        for driver in (self.prefill, self.decode):
            driver.send({"cmd": "transfer", "case": case, "room": room})
        results: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 2 * self.timeout + 60
        drivers = {"prefill": self.prefill, "decode": self.decode}
        while len(results) < 2:
            for name, driver in drivers.items():
                if name in results:
                    continue
                doc = driver.try_recv(0.05)
                if doc is None:
                    continue
                results[name] = doc
                if not doc.get("ok"):  # the other side would wait out SGLang's timeout: stop it
                    other = "decode" if name == "prefill" else "prefill"
                    if other not in results:
                        drivers[other].send({"cmd": "abort"})
            if time.monotonic() > deadline:
                for name, driver in drivers.items():
                    results.setdefault(name, {"ok": False, "stage": None, "error":
                                              f"the {name} driver did not answer ({driver.tail(300)})"})
        return merge(results["prefill"], results["decode"])

    def run(self, pre: SideSpec, dec: SideSpec, room: int = 1) -> dict[str, Any]:
        """Set up a case and move one request: the merged outcome (setup failures included)."""
        setup = self.setup(pre, dec)
        if not setup["ok"]:
            return {"verified": False, "stage": setup["stage"], "error": f"{setup['side']}: {setup['error']}",
                    "setup": setup}
        return self.transfer(setup["case"], room) | {"setup": setup}

    def end(self) -> None:
        """End the current case: both sides' case processes exit, with every manager, agent and engine."""
        if self.case is None:
            return
        for driver in (self.prefill, self.decode):
            driver.send({"cmd": "end", "case": self.case})
        for driver in (self.prefill, self.decode):
            while True:  # skip late answers of the case (an aborted transfer's reply) until it has ended
                doc = driver.recv(self.timeout + SETUP_SLACK_S)
                if doc.get("ended") or doc.get("exited") or doc.get("timeout"):
                    break
        self.case = None

    def close(self) -> None:
        try:
            self.end()
        finally:
            for driver in (self.prefill, self.decode):
                driver.close()


def merge(pre: dict[str, Any], dec: dict[str, Any]) -> dict[str, Any]:
    """One outcome from both sides' answers: verified only if both succeeded, the decode side found every
    byte where it belongs and the aux row arrived; otherwise the earliest stage either side reported
    (SGLang's exception preferred over a side that only timed out or was aborted), and on a "successful"
    transfer with wrong bytes, silent corruption."""
    ok = bool(pre.get("ok")) and bool(dec.get("ok"))
    mismatched = int(dec.get("mismatched_bytes") or 0)
    verified = ok and mismatched == 0 and bool(dec.get("aux_ok"))
    stage = error = None
    if not ok:
        failed = [(n, d) for n, d in (("prefill", pre), ("decode", dec)) if not d.get("ok") and d.get("stage")]
        stage = first_stage(*(d["stage"] for _, d in failed))
        at_stage = [(n, d) for n, d in failed if d["stage"] == stage]
        at_stage.sort(key=lambda nd: "before the timeout" in str(nd[1].get("error")))
        if at_stage:
            error = f"{at_stage[0][0]}: {at_stage[0][1].get('error')}"
        else:
            error = "; ".join(f"{n}: {d.get('error')}" for n, d in (("prefill", pre), ("decode", dec))
                              if not d.get("ok"))
    elif not verified:
        stage = "silent corruption"
        state = int(dec.get("state_mismatched_bytes") or 0)
        error = (f"SGLang reported success, but {mismatched} bytes on the decode side are not where pdctl.plan "
                 "says they belong" + (f" ({state} of them in the mamba state)" if state else "")
                 + ("" if dec.get("aux_ok") else "; the aux (first token) row did not arrive"))
    return {"verified": verified, "stage": stage, "error": error, "mismatched_bytes": mismatched,
            "aux_ok": bool(dec.get("aux_ok")), "seconds": float(pre.get("transfer_s") or 0.0),
            "decode_seconds": float(dec.get("transfer_s") or 0.0),
            "bootstrap_seconds": float(dec.get("bootstrap_s") or 0.0), "bytes": int(dec.get("bytes") or 0),
            "state_bytes": int(dec.get("state_bytes") or 0),
            "state_mismatched_bytes": int(dec.get("state_mismatched_bytes") or 0),
            "descriptors": int(pre.get("descriptors") or 0),
            "bypasses": sorted(set(pre.get("bypasses") or []) | set(dec.get("bypasses") or [])),
            "prefill": pre, "decode": dec}
