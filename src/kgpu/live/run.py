"""``kgpu run``: create smoke-test pods, follow them to a verdict, delete them.

The only code in kgpu that writes to a cluster. Each pod is created, polled until it ends (printing each
new Pending reason: the scheduler's FailedScheduling message, ContainerCreating, image pulls), its log is
streamed (one pod; the stream ends at ``timeout`` too) or collected (several), the verdict is taken from
the exit code and the test's marker, and the pods are deleted in a ``finally`` block, so a failure, a
timeout, Ctrl-C, SIGTERM or SIGHUP (the CLI turns them into exceptions) cleans up too, unless ``keep`` is
set. A pod whose create had no clear answer is deleted as well; deletes are retried (as reads are), and
signals wait while they run.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kgpu.live.client import POD, Ambiguous, ApiClient, NotFound
from kgpu.live.kubeconfig import ClusterError
from kgpu.render.smoketest import SmokeTest

# Waiting reasons that will not fix themselves: stop waiting at once.
FATAL_WAITING = {"InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
# What `timeout`, CI cancellation and a closed terminal send, besides Ctrl-C.
HELD_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


@dataclass
class Outcome:
    name: str
    passed: bool = False
    phase: str = "Pending"
    exit_code: int | None = None
    reason: str = ""
    log: list[str] = field(default_factory=list)
    node: str | None = None
    left_behind: str = ""  # why the pod could not be deleted

    def as_dict(self) -> dict[str, Any]:
        return {"pod": self.name, "passed": self.passed, "phase": self.phase, "exit_code": self.exit_code,
                "node": self.node, "reason": self.reason}


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _s(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) and value else default


def status_line(pod: dict[str, Any]) -> str:
    """What a person watching `kubectl get pod -w` and `describe` would want to know, in one line."""
    status = _d(pod.get("status"))
    phase = _s(status.get("phase"), "Pending")
    for cs in map(_d, _l(status.get("containerStatuses"))):
        state = _d(cs.get("state"))
        if "terminated" in state:
            t = _d(state["terminated"])
            reason = _s(t.get("reason"))
            return f"{phase} (exit code {t.get('exitCode')}{', ' + reason if reason else ''})"
        if "waiting" in state:
            w = _d(state["waiting"])
            msg = f": {_s(w.get('message'))}" if _s(w.get("message")) else ""
            return f"{phase}: {_s(w.get('reason'), 'Waiting')}{msg}"
    for cond in map(_d, _l(status.get("conditions"))):
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            reason, message = _s(cond.get("reason"), "Unschedulable"), _s(cond.get("message"))
            return f"{phase}: {reason}: {message}".rstrip(": ")
    return phase


def _exit_code(pod: dict[str, Any]) -> int | None:
    for cs in map(_d, _l(_d(pod.get("status")).get("containerStatuses"))):
        term = _d(cs.get("state")).get("terminated")
        if isinstance(term, dict):
            code = term.get("exitCode")
            return code if isinstance(code, int) and not isinstance(code, bool) else None
    return None


def _fatal(pod: dict[str, Any]) -> str | None:
    for cs in map(_d, _l(_d(pod.get("status")).get("containerStatuses"))):
        w = _d(_d(cs.get("state")).get("waiting"))
        if w.get("reason") in FATAL_WAITING:
            return f"{w['reason']}: {_s(w.get('message'))}".rstrip(": ")
    return None


def run(client: ApiClient, pods: list[dict[str, Any]], test: SmokeTest, *, timeout: float, keep: bool = False,
        say: Callable[[str], None] = print, poll: float = 1.0,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> list[Outcome]:
    """Run the pods to a verdict. Pods kgpu created, or may have created (a create answered 5xx or not at all:
    the name is kgpu's own), are deleted at the end unless ``keep``; one that could not be deleted has its
    ``left_behind`` set, and is said."""
    namespace = pods[0]["metadata"]["namespace"]
    outcomes = {p["metadata"]["name"]: Outcome(p["metadata"]["name"]) for p in pods}
    created: list[str] = []
    stream = len(pods) == 1
    try:
        for pod in pods:
            name = pod["metadata"]["name"]
            created.append(name)  # from before the request: an interrupt may come while it is in flight
            try:
                client.create(POD, pod, namespace)
            except Ambiguous:
                raise  # it may exist: it is deleted too
            except ClusterError:
                created.remove(name)  # refused: not created (and a pod of that name is not kgpu's)
                raise
            say(f"pod/{name} created in namespace {namespace}")
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
                if not isinstance(obj, dict):
                    raise ClusterError(f"get pods: the answer for pod/{name} is not an object")
                out = outcomes[name]
                out.phase = _s(_d(obj.get("status")).get("phase"), "Pending")
                out.node = _s(_d(obj.get("spec")).get("nodeName")) or None
                line = status_line(obj)
                if line != last.get(name):
                    say(f"pod/{name}: {line}")
                    last[name] = line
                if out.phase == "Running" and stream:
                    stream = False  # one follow per run: when it ends the container has ended
                    until = time.monotonic() + max(0.0, deadline - clock())  # --timeout bounds the stream
                    try:
                        for text in client.logs(name, namespace, follow=True, until=until):
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
        if not keep and created:
            with _signals_held():
                for name in created:
                    _delete(client, name, namespace, outcomes[name], say)
    return [outcomes[p["metadata"]["name"]] for p in pods]


def _delete(client: ApiClient, name: str, namespace: str, out: Outcome, say: Callable[[str], None]) -> None:
    try:
        client.delete(POD, name, namespace, grace_seconds=0)
    except ClusterError as exc:
        out.left_behind = exc.line()
        _say(say, f"warning: could not delete pod/{name}: {exc.line()}")
    else:
        _say(say, f"pod/{name} deleted")


def _say(say: Callable[[str], None], line: str) -> None:
    """Progress during clean-up: a terminal that went away (SIGHUP, EIO) must not stop the deletes."""
    with contextlib.suppress(OSError, ValueError):
        say(line)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """While test pods are deleted, Ctrl-C, SIGTERM and SIGHUP wait: the deletes are bounded (retries of
    ``--request-timeout`` each), and a second signal must not leave a pod running. A signal that came
    meanwhile is delivered afterwards, unless an interrupt is already on its way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {}
    for sig in HELD_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            old[sig] = signal.signal(sig, lambda signum, _frame: got.append(signum))
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if got and sys.exc_info()[1] is None:
            signal.raise_signal(got[0])


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
