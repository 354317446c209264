"""What a pod's status says (pure functions over the API's Pod objects as dicts): ready or not, restarts,
and the reason a pod will not become ready on its own — the reason Kubernetes itself gives (ErrImagePull,
CrashLoopBackOff, ...), which pdctl shows instead of waiting out its timeout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# container waiting reasons that do not resolve by waiting (kubelet's own words)
FATAL_WAITING = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CrashLoopBackOff",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
})


@dataclass(frozen=True)
class PodView:
    """One pod as status and readiness see it."""

    name: str
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    ready: bool
    restarts: int
    ip: str | None
    node: str | None  # the Kubernetes node the scheduler chose
    reason: str | None  # why it is not running/ready (the kubelet's reason), None when fine
    message: str | None  # the kubelet's / scheduler's message
    exit_code: int | None  # the container's last exit code, when it has terminated
    fatal: bool  # waiting for it cannot help (FATAL_WAITING, or the pod failed)
    # why the container's previous run ended (lastState.terminated: OOMKilled, Error), while it waits to restart
    last_end: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.name, "phase": self.phase, "ready": self.ready, "restarts": self.restarts,
                "pod_ip": self.ip, "k8s_node": self.node, "reason": self.reason, "message": self.message,
                "exit_code": self.exit_code}


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def view(pod: dict[str, Any]) -> PodView:
    """POD (an API Pod as a dict, camelCase keys) as a PodView."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    containers = status.get("containerStatuses") or []
    ready_cond = _condition(status, "Ready")
    ready = bool(ready_cond and ready_cond.get("status") == "True")
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    reason = message = last_end = None
    exit_code: int | None = None
    fatal = phase == "Failed"
    for c in containers:
        state, last = c.get("state") or {}, c.get("lastState") or {}
        term = state.get("terminated") or last.get("terminated")
        if term:
            exit_code = term.get("exitCode")
        if last.get("terminated") and last["terminated"].get("reason"):
            last_end = f"{last['terminated']['reason']} (exit code {last['terminated'].get('exitCode')})"
        if "waiting" in state and state["waiting"].get("reason"):
            reason, message = state["waiting"]["reason"], state["waiting"].get("message")
            fatal = fatal or reason in FATAL_WAITING
            break
        if "terminated" in state:
            reason, message = state["terminated"].get("reason") or "Terminated", state["terminated"].get("message")
    scheduled = _condition(status, "PodScheduled")
    if reason is None and scheduled is not None and scheduled.get("status") == "False":
        reason, message = scheduled.get("reason") or "Unschedulable", scheduled.get("message")
    if reason is None and phase == "Failed":
        reason, message = status.get("reason") or "Failed", status.get("message")
    return PodView(name=meta.get("name", "?"), phase=phase, ready=ready, restarts=restarts,
                   ip=status.get("podIP"), node=(pod.get("spec") or {}).get("nodeName"), reason=reason,
                   message=message, exit_code=exit_code, fatal=fatal, last_end=last_end)


def describe(v: PodView) -> str:
    """One line: 'Running, ready' / 'Pending: Unschedulable (0/4 nodes ...)' / 'CrashLoopBackOff (exit 1, 3
    restarts): back-off ...'."""
    if v.ready:
        return "Running, ready" + (f" ({v.restarts} restarts)" if v.restarts else "")
    if v.reason is None:
        return f"{v.phase}, not ready"
    extra = []
    if v.exit_code is not None:
        extra.append(f"exit {v.exit_code}")
    if v.restarts:
        extra.append(f"{v.restarts} restarts")
    text = v.reason + (f" ({', '.join(extra)})" if extra else "")
    return text + (f": {v.message}" if v.message else "")
