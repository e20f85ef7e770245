"""The structured allocator's search on one node (k8s.io/dynamic-resource-allocation/structured, allocator.go):
every claim's requests filled in order from the candidate devices, backtracking over combinations when a
constraint (``matchAttribute``, ``distinctAttribute``) fails, bounded at ``SEARCH_STEPS`` device tries;
the allocator's errors in its words. kgpu.sim.scheduler.plugins.dynamicresources finds the candidates and
calls it from DynamicResources' Filter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kgpu.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    AllocatedDevice,
    Claim,
    ClaimSpec,
    Device,
    Exact,
    ResourceSlice,
)
from kgpu.model.objects import Node, Pod

# kube-scheduler gives the allocator's search on one node 10 s (FilterTimeout, DRASchedulerFilterTimeout on
# by default in 1.34), then the node is UnschedulableAndUnresolvable with these words. The search backtracks
# over device combinations and can take exponential time on claims with constraints; kgpu stops it after a
# number of device tries instead of a wall-clock time, so that its answer does not depend on the machine:
# SEARCH_STEPS tries take about 5 s here (2 shared cores), inside the real timeout on any node kube-scheduler
# runs on.
TIMED_OUT = "timed out trying to allocate devices"


SEARCH_STEPS = 1_000_000


class AllocationError(Exception):
    """The allocator's error: the Filter returns an Error status and the cycle aborts."""


class _TimedOut(Exception):
    """The search ran past SEARCH_STEPS device tries (kube-scheduler's Filter timeout)."""


@dataclass
class _Pool:
    driver: str
    name: str
    slices: list[ResourceSlice]
    incomplete: bool


class _Candidate:
    """A device the allocator may take for a request, with its driver and pool (``id`` names it)."""

    __slots__ = ("device", "driver", "error", "id", "pool")

    def __init__(self, driver: str, pool: str, device: Device, error: str = "") -> None:
        self.driver, self.pool, self.device = driver, pool, device
        # the text of the CEL runtime error evaluating the device's selectors ("claim: ..." for the
        # request's, which the allocator names with the claim): the allocator fails when it gets to the device
        self.error = error
        self.id = (driver, pool, device.name)


def _error_text(c: _Candidate, claim: Claim) -> str:
    """The allocator's error for a device whose selector failed: a request's selector names the claim."""
    if c.error.startswith("claim: "):
        return f"claim {claim.key}: {c.error[len('claim: '):]}"
    return c.error


def _short(alt: Exact) -> str:
    """The request's name as the allocator's errors give it: a sub-request's own name."""
    return alt.name.rpartition("/")[2]


class Devices(Protocol):
    """What the search reads of DynamicResources' state (kgpu.sim.scheduler.plugins.dynamicresources.DRA):
    the devices claims hold, and a request's candidate devices on a node."""

    _in_use: set[tuple[str, str, str]]

    def candidates(self, pod: Pod, node: Node, pools: list[_Pool], alt: Exact) -> list[_Candidate]: ...

class _Search:
    """One run of the allocator for one pod's claims on one node.

    As the stable allocator: the requests are validated first, in claim and request order (``All``
    counts its devices there, and fails on an incomplete pool; a claim asking for more than 32 devices
    is an error); then a depth-first search, claim by claim, request by request, device by device, takes
    the first solution. A device is in use when a claim holds it, or when this search took it for a
    request without ``adminAccess`` or for any request of the same claim; one taken with ``adminAccess``
    stays free for other claims' admin requests only."""

    def __init__(self, dra: Devices, pod: Pod, claims: list[Claim], node: Node, pools: list[_Pool]) -> None:
        self.dra, self.pod, self.claims, self.node, self.pools = dra, pod, claims, node, pools
        self.taken: dict[tuple[str, str, str], set[int]] = {}  # device -> the claims (indices) taking it
        self.chosen: list[list[AllocatedDevice]] = [[] for _ in claims]
        self._constraint_values: list[dict[int, tuple[Any, int]]] = [{} for _ in claims]
        self.steps = 0  # device tries (SEARCH_STEPS)

    def validate(self) -> None:
        """The allocator's checks before its search; raises AllocationError."""
        for claim in self.claims:
            total = 0
            for req in claim.spec.requests:
                least = -1
                for alt in req.alternatives:
                    n = self._count(claim, alt)
                    least = n if least < 0 else min(least, n)
                total += max(least, 0)
            if total > ALLOCATION_RESULTS_MAX:
                raise AllocationError(f"claim {claim.key}: number of requested devices {total} exceeds the claim "
                                      f"limit of {ALLOCATION_RESULTS_MAX}")

    def _count(self, claim: Claim, alt: Exact) -> int:
        if alt.mode != ALL:
            return alt.count
        entries = self._devices(alt)
        by_pool: dict[tuple[str, str], list[_Candidate]] = {}
        for e in entries:
            by_pool.setdefault((e.driver, e.pool), []).append(e)
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(f"claim {claim.key}, request {_short(alt)}: asks for all devices, but resource "
                                      f"pool {pool.driver}/{pool.name} is currently being updated")
            for e in by_pool.get((pool.driver, pool.name), ()):
                if e.error:
                    raise AllocationError(_error_text(e, claim))
        return len(entries)

    def run(self) -> list[list[AllocatedDevice]] | None:
        return self.chosen if self._request(0, 0) else None

    def _request(self, ci: int, ri: int) -> bool:
        if ci == len(self.claims):
            return True
        spec = self.claims[ci].spec
        if ri == len(spec.requests):
            return self._request(ci + 1, 0)
        req = spec.requests[ri]
        return any(self._fill(ci, ri, req.name, alt) for alt in req.alternatives)

    def _devices(self, alt: Exact) -> list[_Candidate]:
        return self.dra.candidates(self.pod, self.node, self.pools, alt)

    def _busy(self, ci: int, alt: Exact, c: _Candidate) -> bool:
        holders = self.taken.get(c.id)
        if alt.admin_access:
            return holders is not None and ci in holders
        return c.id in self.dra._in_use or bool(holders)

    def _fill(self, ci: int, ri: int, request: str, alt: Exact) -> bool:
        entries = self._devices(alt)
        if alt.mode == ALL:
            if not entries or len(self.chosen[ci]) + len(entries) > ALLOCATION_RESULTS_MAX:
                return False
            undo: list[_Candidate] = []
            ok = True
            for c in entries:  # validated: no device with an error
                if self._busy(ci, alt, c):
                    ok = False
                    break
                if not self._take(ci, request, alt, c):
                    raise AllocationError(f"claim {self.claims[ci].key}, request {_short(alt)}: cannot add device "
                                          f"{c.driver}/{c.pool}/{c.device.name} because a claim constraint would not be "
                                          "satisfied")
                undo.append(c)
            if ok and self._request(ci, ri + 1):
                return True
            for c in reversed(undo):
                self._give_back(ci, request, alt, c)
            return False
        if len(self.chosen[ci]) + alt.count > ALLOCATION_RESULTS_MAX:
            return False
        return self._pick(ci, ri, request, alt, entries, 0, alt.count)

    def _pick(self, ci: int, ri: int, request: str, alt: Exact, devices: list[_Candidate], start: int, left: int) -> bool:
        if left == 0:
            return self._request(ci, ri + 1)
        for i in range(start, len(devices)):
            c = devices[i]
            if self._busy(ci, alt, c):
                continue
            if c.error:  # the allocator evaluates this device's selectors here, and fails
                raise AllocationError(_error_text(c, self.claims[ci]))
            if not self._take(ci, request, alt, c):
                continue
            if self._pick(ci, ri, request, alt, devices, i + 1, left - 1):
                return True
            self._give_back(ci, request, alt, c)
        return False

    def _take(self, ci: int, request: str, alt: Exact, c: _Candidate) -> bool:
        """Takes a free device if it keeps the claim's constraints."""
        self.steps += 1
        if self.steps > SEARCH_STEPS:
            raise _TimedOut
        values = self._constraint_values[ci]
        spec: ClaimSpec = self.claims[ci].spec
        set_now: list[int] = []
        for k, con in enumerate(spec.constraints):
            if con.requests and request not in con.requests and alt.name not in con.requests:
                continue
            value = _attribute(c, con.match_attribute)
            if value is _MISSING:
                for j in set_now:
                    self._unset(values, j)
                return False
            have = values.get(k)
            if have is not None and have[0] != value:
                for j in set_now:
                    self._unset(values, j)
                return False
            values[k] = (value, (have[1] if have else 0) + 1)
            set_now.append(k)
        self.taken.setdefault(c.id, set()).add(ci)
        self.chosen[ci].append(AllocatedDevice(alt.name, c.driver, c.pool, c.device.name, alt.admin_access))
        return True

    def _give_back(self, ci: int, request: str, alt: Exact, c: _Candidate) -> None:
        holders = self.taken.get(c.id)
        if holders is not None:
            holders.discard(ci)
        self.chosen[ci].pop()
        values = self._constraint_values[ci]
        for k, con in enumerate(self.claims[ci].spec.constraints):
            if con.requests and request not in con.requests and alt.name not in con.requests:
                continue
            self._unset(values, k)

    @staticmethod
    def _unset(values: dict[int, tuple[Any, int]], k: int) -> None:
        value, n = values[k]
        if n <= 1:
            del values[k]
        else:
            values[k] = (value, n - 1)


def _attribute(c: _Candidate, name: str) -> Any:
    """The value a ``matchAttribute`` compares, typed (an int 1 is not a bool true): the fully qualified
    attribute, or the driver's own by its short name."""
    value = c.device.attributes.get(name, _MISSING)
    if value is _MISSING:
        return _MISSING
    return (type(value).__name__, value)


_MISSING = object()
