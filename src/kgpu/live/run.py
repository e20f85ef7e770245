"""``kgpu run``: create smoke-test pods, follow them to a verdict, delete them.

The only code in kgpu that writes to a cluster. Each pod is created, polled until it ends (printing each
new Pending reason: the scheduler's FailedScheduling message, ContainerCreating, image pulls), its log is
streamed (one pod) or collected (several), the verdict is taken from the exit code and the test's marker,
and the pods are deleted in a ``finally`` block, so a failure, a timeout or Ctrl-C cleans up too, unless
``keep`` is set.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kgpu.live.client import POD, ApiClient, NotFound
from kgpu.live.kubeconfig import ClusterError
from kgpu.render.smoketest import SmokeTest

# Waiting reasons that will not fix themselves: stop waiting at once.
FATAL_WAITING = {"InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


@dataclass
class Outcome:
    name: str
    passed: bool = False
    phase: str = "Pending"
    exit_code: int | None = None
    reason: str = ""
    log: list[str] = field(default_factory=list)
    node: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"pod": self.name, "passed": self.passed, "phase": self.phase, "exitCode": self.exit_code,
                "node": self.node, "reason": self.reason}


def status_line(pod: dict[str, Any]) -> str:
    """What a person watching `kubectl get pod -w` and `describe` would want to know, in one line."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "terminated" in state:
            t = state["terminated"]
            return f"{phase} (exit code {t.get('exitCode')}{', ' + t['reason'] if t.get('reason') else ''})"
        if "waiting" in state:
            w = state["waiting"]
            msg = f": {w['message']}" if w.get("message") else ""
            return f"{phase}: {w.get('reason', 'Waiting')}{msg}"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{phase}: {cond.get('reason', 'Unschedulable')}: {cond.get('message', '')}".rstrip(": ")
    return phase


def _exit_code(pod: dict[str, Any]) -> int | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term is not None:
            code = term.get("exitCode")
            return code if isinstance(code, int) else None
    return None


def _fatal(pod: dict[str, Any]) -> str | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        w = (cs.get("state") or {}).get("waiting") or {}
        if w.get("reason") in FATAL_WAITING:
            return f"{w['reason']}: {w.get('message', '')}".rstrip(": ")
    return None


def run(client: ApiClient, pods: list[dict[str, Any]], test: SmokeTest, *, timeout: float, keep: bool = False,
        say: Callable[[str], None] = print, poll: float = 1.0,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> list[Outcome]:
    namespace = pods[0]["metadata"]["namespace"]
    outcomes = {p["metadata"]["name"]: Outcome(p["metadata"]["name"]) for p in pods}
    created: list[str] = []
    stream = len(pods) == 1
    try:
        for pod in pods:
            client.create(POD, pod, namespace)
            created.append(pod["metadata"]["name"])
            say(f"pod/{pod['metadata']['name']} created in namespace {namespace}")
        deadline = clock() + timeout
        last: dict[str, str] = {}
        waiting = set(outcomes)
        while waiting:
            for name in sorted(waiting):
                try:
                    obj = client.get(POD, name, namespace)
                except NotFound:
                    outcomes[name].reason = "the pod was deleted before it finished"
                    waiting.discard(name)
                    continue
                out = outcomes[name]
                out.phase = (obj.get("status") or {}).get("phase") or "Pending"
                out.node = (obj.get("spec") or {}).get("nodeName") or None
                line = status_line(obj)
                if line != last.get(name):
                    say(f"pod/{name}: {line}")
                    last[name] = line
                if out.phase == "Running" and stream:
                    stream = False  # one follow per run: when it ends the container has ended
                    try:
                        for text in client.logs(name, namespace, follow=True):
                            out.log.append(text)
                            say(f"  | {text}")
                    except ClusterError as exc:
                        say(f"pod/{name}: cannot stream the log: {exc.line()}")
                    continue  # the next poll reads the exit code
                fatal = _fatal(obj)
                if out.phase in ("Succeeded", "Failed") or fatal:
                    if not out.log:
                        out.log = _collect(client, name, namespace, say)
                    out.exit_code = _exit_code(obj)
                    out.passed = fatal is None and test.passed(out.exit_code, "\n".join(out.log))
                    out.reason = fatal or _verdict_reason(test, out)
                    waiting.discard(name)
            if waiting:
                if clock() >= deadline:
                    for name in waiting:
                        outcomes[name].reason = f"timed out after {timeout:g}s ({last.get(name, 'Pending')})"
                    break
                sleep(poll)
    finally:
        if not keep:
            for name in created:
                try:
                    client.delete(POD, name, namespace, grace_seconds=0)
                except ClusterError as exc:
                    say(f"warning: could not delete pod/{name}: {exc.line()}")
                else:
                    say(f"pod/{name} deleted")
    return [outcomes[p["metadata"]["name"]] for p in pods]


def _collect(client: ApiClient, name: str, namespace: str, say: Callable[[str], None]) -> list[str]:
    try:
        lines = list(client.logs(name, namespace))
    except ClusterError as exc:
        say(f"pod/{name}: no log: {exc.line()}")
        return []
    for text in lines:
        say(f"  | {text}")
    return lines


def _verdict_reason(test: SmokeTest, out: Outcome) -> str:
    if out.passed:
        return f"{test.name} passed" + (f" ({test.marker!r} in the log)" if test.marker else "")
    if out.exit_code not in (0, None):
        return f"exit code {out.exit_code}"
    if test.marker:
        return f"{test.marker!r} not in the log"
    return f"the pod ended {out.phase} without an exit code"
