"""Dynamic Resource Allocation in the scheduler: the DynamicResources plugin and the structured allocator.

kube-scheduler 1.34 (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go) gives a pod with
``spec.resourceClaims``:

- PreEnqueue: every claim must exist (a template's claim is named in ``status.resourceClaimStatuses``) and not
  be being deleted; otherwise the pod never enters the scheduling queue, is never tried and gets no
  FailedScheduling event. kgpu says so in its own words (``not_enqueued``), with the reason: ``pod "ns/name":
  ResourceClaim not created yet`` (k8s.io/dynamic-resource-allocation/resourceclaim), ``could not find
  ResourceClaim "ns/name"`` (the scheduler's assume cache), ``resourceclaim "name" is being deleted``.
- PreFilter: every device class an unallocated claim asks for must exist. A failure is
  UnschedulableAndUnresolvable and its text replaces the per-node histogram: ``0/N nodes are available:
  <text>.``: ``request <r>: device class <c> does not exist``.
- Filter, per node: an allocated claim whose allocation's node selector does not match the node gives
  ``resourceclaim not available on the node``; otherwise the claims still to allocate go through the
  structured allocator, and ``cannot allocate all claims`` when it finds no solution. Both are
  UnschedulableAndUnresolvable. An allocator error (a CEL runtime error, ``All`` on a pool being updated)
  aborts the cycle: ``running "DynamicResources" filter plugin: <error>`` (the framework's words).
- PostFilter: ``no new claims to deallocate`` when PreFilter found no claims, else (nothing kgpu models can
  be deallocated) ``still not schedulable``; DefaultPreemption's words follow.

The allocator (k8s.io/dynamic-resource-allocation/structured, the stable implementation 1.34 uses with its
default feature gates) looks at the node's pools: slices whose ``nodeName`` is the node, whose
``nodeSelector`` matches it, or ``allNodes``; per pool only the slices of the newest generation count, and a
pool with fewer of those than ``resourceSliceCount`` is incomplete. kube-scheduler tries pools in Go map order
and slices in informer order (both change from one cycle to the next); kgpu takes one of those orders, pools
by driver then pool name, slices in input order; devices in slice order. Before its search the allocator
checks every request: ``All`` counts its devices (an incomplete pool is an error), and a claim needing more
than 32 devices is an error. Claims, then requests, then devices are filled in order, the
first device that matches the class's and the request's selectors, is free (not allocated to another claim,
unless the request has adminAccess) and keeps every ``matchAttribute`` constraint; on a dead end the last
choice is undone and the next device tried (backtracking); ``firstAvailable`` tries its sub-requests in order.
There is no scoring: the first solution wins. ``All`` takes every matching device of the node and fails when
there is none or when one is taken; one that breaks a constraint is an error. Filter says
``resourceclaim not available on the node`` only where the allocator succeeded.

Checked against the real plugin by ``conformance/tests/test_dra_differential.py`` (dra-oracle).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.errors import InputError
from kgpu.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    AllocatedDevice,
    Allocation,
    Claim,
    ClaimSpec,
    Device,
    DeviceClass,
    DRAObjects,
    Exact,
    ResourceSlice,
    Selector,
)
from kgpu.model.gpus import slice_devices
from kgpu.model.objects import CPU, MEMORY, Node, NodeSelector, Pod, Requirement, Term
from kgpu.model.predicates import filter_reasons, node_selector_matches, unschedulable_message
from kgpu.sim.scheduler.plugins.cel import CelSyntaxError, Evaluator, Unsupported, readers
from kgpu.sim.scheduler.scheduler import _score, fits

NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
# kube-scheduler gives the allocator's search on one node 10 s (FilterTimeout, DRASchedulerFilterTimeout on
# by default in 1.34), then the node is UnschedulableAndUnresolvable with these words. The search backtracks
# over device combinations and can take exponential time on claims with constraints; kgpu stops it after a
# number of device tries instead of a wall-clock time, so that its answer does not depend on the machine:
# SEARCH_STEPS tries take about 5 s here (2 shared cores), inside the real timeout on any node kube-scheduler
# runs on.
TIMED_OUT = "timed out trying to allocate devices"
SEARCH_STEPS = 1_000_000
NO_CLAIMS = "no new claims to deallocate"
STILL_NOT = "still not schedulable"
PLUGIN = "DynamicResources"


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


@dataclass
class Verdict:
    """What DynamicResources says about one pod: the claims (PreFilter) or why not."""

    claims: list[Claim] = field(default_factory=list)
    message: str = ""  # PreFilter's rejection
    enqueue: bool = False  # the rejection is PreEnqueue's too (a claim missing or being deleted): never tried


class DRA:
    """The cluster's DRA state during a simulation: classes, claims, slices and the devices in use."""

    def __init__(self, objects: DRAObjects) -> None:
        self.objects = objects
        self.classes = objects.classes
        self.claims: dict[str, Claim] = dict(objects.claims)
        self.templates = objects.templates
        self.evaluator = Evaluator()
        self.warnings: dict[str, list[str]] = {}  # pod key -> unsupported selectors it met
        self._unsupported: set[str] = set()
        programs = []
        for sel in self._all_selectors():
            try:
                programs.append(self.evaluator.program(sel.expression))
            except CelSyntaxError as exc:
                raise InputError(f"compilation failed: {exc}", where=sel.where) from None
        # what any selector can read of a device (None: one enumerates a map, so everything): slices whose
        # devices agree on it get the same verdicts, found once (kgpu.sim.scheduler.plugins.cel memoises per device likewise)
        self._known = frozenset(p.expression for p in programs)
        self._reads: frozenset[str] | None = (
            None if any(p.everything for p in programs) else frozenset().union(*(p.names for p in programs)))
        self._contents: dict[int, tuple[ResourceSlice, int]] = {}  # id(slice) -> the slice, its content's id
        self._content_ids: dict[tuple[Any, ...], int] = {}
        self._alt_keys: dict[int, tuple[Exact, int]] = {}  # id(request) -> the request, its key
        self._alt_ids: dict[tuple[str, tuple[Selector, ...]], int] = {}
        self._content_readers: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[int, Any, Any]] = {}
        self._verdicts: dict[tuple[Any, ...], tuple[tuple[tuple[int, str], ...], tuple[str, ...]]] = {}
        # pools by the node their slices name, and the pools whose slices select nodes (allNodes, nodeSelector)
        self._by_node: dict[str, dict[tuple[str, str], list[ResourceSlice]]] = {}
        self._selecting: dict[tuple[str, str], list[ResourceSlice]] = {}
        self._order = {id(s): i for i, s in enumerate(objects.slices)}
        for s in objects.slices:
            if s.node_name:
                self._by_node.setdefault(s.node_name, {}).setdefault((s.driver, s.pool), []).append(s)
            elif s.all_nodes or s.node_selector is not None:
                self._selecting.setdefault((s.driver, s.pool), []).append(s)
        self._node_pools: dict[str, list[_Pool]] = {}
        self._in_use: set[tuple[str, str, str]] = set()
        self._pinned: dict[str, str | None] = {}  # claim key -> node name its allocation is bound to
        # per node, per request's class and selectors (_alt_key): the candidates, the warnings, whether one
        # has an error
        self._candidates: dict[str, dict[int, tuple[list[_Candidate], tuple[str, ...], bool]]] = {}
        self._slice_cands: dict[int, tuple[ResourceSlice, list[_Candidate]]] = {}
        # per node, where each of its devices comes from (commit writes the allocation's node selector)
        self._sources: dict[str, dict[tuple[str, str, str], ResourceSlice] | None] = {}  # None: all its own
        self._lanes: dict[tuple[Any, ...], _Lane] = {}
        self._lane_ids: dict[tuple[Any, ...], tuple[tuple[Any, ...], _Lane]] = {}
        self._scores: dict[tuple[int, int, int, int], dict[int, tuple[int, int]]] = {}  # per score key, node
        for claim in self.claims.values():
            if claim.allocation is not None:
                for d in claim.allocation.devices:
                    if not d.admin_access:
                        self._in_use.add((d.driver, d.pool, d.device))

    def publish(self, slices: Sequence[ResourceSlice]) -> None:
        """Slices published during the simulation (a node a provisioner launched, kgpu.sim.provisioners.provision):
        indexed as if read with the input, after it."""
        for s in slices:
            self._order[id(s)] = len(self.objects.slices)
            self.objects.slices.append(s)
            if s.node_name:
                self._by_node.setdefault(s.node_name, {}).setdefault((s.driver, s.pool), []).append(s)
                for cache in (self._node_pools, self._candidates, self._sources):
                    cache.pop(s.node_name, None)
            elif s.all_nodes or s.node_selector is not None:
                self._selecting.setdefault((s.driver, s.pool), []).append(s)
                for cache in (self._node_pools, self._candidates, self._sources):
                    cache.clear()

    def gpu_usage(self, allocated: Iterable[tuple[str, str, str]] = ()) -> dict[str, dict[str, tuple[int, int]]]:
        """NVIDIA's DRA GPUs per node, by kind (``kgpu.model.gpus``: dra:gpu, dra:mig-<profile>): (in use,
        published), from the slices published for the node and the devices allocated (the claims' and
        ``allocated``: (driver, pool, device) of claims placed outside this state, on new nodes)."""
        used = self._in_use | set(allocated)
        out: dict[str, dict[str, tuple[int, int]]] = {}
        for node, pools in self._by_node.items():
            kinds: dict[str, tuple[int, int]] = {}
            for group in pools.values():
                for s in group:
                    for d in slice_devices(s):
                        if d.label:
                            n, total = kinds.get(d.label, (0, 0))
                            kinds[d.label] = (n + ((s.driver, s.pool, d.name) in used), total + 1)
            if kinds:
                out[node] = kinds
        return out

    def _all_selectors(self) -> list[Selector]:
        out = [s for c in self.classes.values() for s in c.selectors]
        specs = [c.spec for c in self.claims.values()] + [t.spec for t in self.templates.values()]
        out += [s for spec in specs for r in spec.requests for a in r.alternatives for s in a.selectors]
        return out

    # --- PreFilter -------------------------------------------------------------------------------------

    def prefilter(self, pod: Pod) -> Verdict:
        statuses = dict(pod.claim_statuses)
        claims: list[Claim] = []
        for name, claim_name, template in pod.spec.claim_refs:
            if claim_name:
                key = f"{pod.namespace}/{claim_name}"
            elif template:
                if name in statuses:
                    if not statuses[name]:
                        continue  # intentionally not created
                    key = f"{pod.namespace}/{statuses[name]}"
                else:
                    made = self._from_template(pod, name, template)
                    if made is None:
                        return Verdict(message=f'pod "{pod.key}": ResourceClaim not created yet', enqueue=True)
                    key = made.key
            else:
                return Verdict(message=f'pod "{pod.key}", spec.resourceClaim "{name}": none of the supported fields are set', enqueue=True)
            claim = self.claims.get(key)
            if claim is None:
                return Verdict(message=f'could not find ResourceClaim "{key}"', enqueue=True)
            if claim.deleting:
                return Verdict(message=f'resourceclaim "{claim.name}" is being deleted', enqueue=True)
            claims.append(claim)
        for claim in claims:
            if claim.allocation is not None:
                continue
            for req in claim.spec.requests:
                for alt in req.alternatives:
                    if alt.device_class not in self.classes:
                        return Verdict(message=f"request {alt.name}: device class {alt.device_class} does not exist")
        return Verdict(claims)

    def _from_template(self, pod: Pod, name: str, template: str) -> Claim | None:
        """The claim the resourceclaim controller creates for the pod from the template (it names it
        <pod>-<claim>-<random suffix>; kgpu leaves the suffix out), or None when the template is missing."""
        key = f"{pod.namespace}/{pod.name}-{name}"
        if key in self.claims:
            return self.claims[key]
        tpl = self.templates.get(f"{pod.namespace}/{template}")
        if tpl is None:
            return None
        claim = Claim(pod.namespace, f"{pod.name}-{name}", tpl.spec, tpl.where, owner=("Pod", pod.name))
        self.claims[key] = claim
        return claim

    # --- Filter ----------------------------------------------------------------------------------------

    def filter(self, pod: Pod, claims: Sequence[Claim], node: Node) -> tuple[str | None, list[list[AllocatedDevice]]]:
        """None and the allocations of the claims to allocate, or the reason the node fails; raises
        AllocationError.

        As the plugin's Filter: the claims still to allocate go through the allocator first (its error, then
        ``cannot allocate all claims``), and only then does an allocated claim bound elsewhere make the node
        fail with ``resourceclaim not available on the node``."""
        unavailable = False
        for claim in claims:
            if claim.allocation is not None:
                pinned = self._pinned.get(claim.key, "")
                sel = claim.allocation.node_selector
                if pinned:
                    if pinned != node.name:
                        unavailable = True
                elif sel is not None and not node_selector_matches(sel, node.labels, node.name):
                    unavailable = True
        todo = [c for c in claims if c.allocation is None]
        if not todo:
            return (NOT_AVAILABLE, []) if unavailable else (None, [])
        spec = todo[0].spec
        if len(todo) == 1 and len(spec.requests) == 1 and not spec.constraints and len(spec.requests[0].alternatives) == 1:
            alt = spec.requests[0].alternatives[0]
            if alt.mode != ALL:  # one request, no constraint: the search's first solution is the first free devices
                reason, first = self._first_free(pod, todo[0], alt, node)
                return (NOT_AVAILABLE, []) if unavailable and reason is None else (reason, first)
        search = _Search(self, pod, todo, node, self._pools(node))
        search.validate()
        try:
            result = search.run()
        except _TimedOut:
            return TIMED_OUT, []
        if result is None:
            return CANNOT_ALLOCATE, []
        return (NOT_AVAILABLE, []) if unavailable else (None, result)

    def _first_free(self, pod: Pod, claim: Claim, alt: Exact, node: Node) -> tuple[str | None, list[list[AllocatedDevice]]]:
        chosen: list[AllocatedDevice] = []
        in_use, admin, need = self._in_use, alt.admin_access, alt.count
        if need > ALLOCATION_RESULTS_MAX:
            raise AllocationError(f"claim {claim.key}: number of requested devices {need} exceeds the claim limit of "
                                  f"{ALLOCATION_RESULTS_MAX}")
        for c in self.candidates(pod, node, self._pools(node), alt):
            if not admin and c.id in in_use:
                continue  # the allocator skips a device in use before it evaluates its selectors
            if c.error:
                raise AllocationError(_error_text(c, claim))
            chosen.append(AllocatedDevice(alt.name, c.driver, c.pool, c.device.name, admin))
            if len(chosen) == need:
                return None, [chosen]
        return CANNOT_ALLOCATE, []

    def commit(self, claims: Sequence[Claim], allocations: list[list[AllocatedDevice]], node: Node) -> None:
        """Reserve: the claims to allocate are allocated on ``node``."""
        todo = [c for c in claims if c.allocation is None]
        for claim, devices in zip(todo, allocations, strict=True):
            pinned, selector = self._allocation_nodes(node, devices)
            claim.allocation = Allocation(tuple(devices), selector)
            self._pinned[claim.key] = pinned
            for d in devices:
                if not d.admin_access:
                    self._in_use.add((d.driver, d.pool, d.device))

    def _allocation_nodes(self, node: Node, devices: Sequence[AllocatedDevice]) -> tuple[str | None, NodeSelector | None]:
        """Where an allocation may be used, as the allocator writes its node selector: the node, when a device
        comes from a slice with ``nodeName``; else the requirements of the ``nodeSelector`` slices' (one
        term each) in one term; else anywhere (``allNodes``)."""
        if node.name in self._sources:
            where = self._sources[node.name]
        else:
            slices = [s for pool in self._pools(node) for s in pool.slices]
            where = None  # every device is the node's own
            if not all(s.node_name for s in slices):
                where = {}
                for s in slices:
                    for dev in s.devices:
                        where.setdefault((s.driver, s.pool, dev.name), s)
            self._sources[node.name] = where
        if where is None:
            return (node.name, None) if devices else (None, None)
        exprs: list[Requirement] = []
        fields: list[Requirement] = []
        for d in devices:
            src = where.get((d.driver, d.pool, d.device))
            if src is None:
                continue
            if src.node_name:
                return node.name, None
            if src.node_selector is not None and len(src.node_selector.terms) == 1:
                term = src.node_selector.terms[0]
                exprs.extend(r for r in term.match_expressions if r not in exprs)
                fields.extend(r for r in term.match_fields if r not in fields)
        if exprs or fields:
            return None, NodeSelector((Term(tuple(exprs), tuple(fields)),))
        return None, None

    def _pools(self, node: Node) -> list[_Pool]:
        hit = self._node_pools.get(node.name)
        if hit is not None:
            return hit
        pools = []
        found: dict[tuple[str, str], list[ResourceSlice]] = {k: list(v) for k, v in self._by_node.get(node.name, {}).items()}
        for key, slices in self._selecting.items():
            for s in slices:
                if s.all_nodes or (s.node_selector is not None and node_selector_matches(s.node_selector, node.labels, node.name)):
                    found.setdefault(key, []).append(s)
        mixed = set(found) & set(self._selecting) & set(self._by_node.get(node.name, {}))
        for (driver, name), mine in found.items():
            if (driver, name) in mixed:  # slices of both kinds: input order
                mine.sort(key=lambda s: self._order[id(s)])
            newest = max(s.generation for s in mine)
            mine = [s for s in mine if s.generation == newest]  # outdated generations are ignored
            pools.append(_Pool(driver, name, mine, len(mine) < mine[0].slice_count))
        pools.sort(key=lambda p: (p.driver, p.name))
        self._node_pools[node.name] = pools
        return pools

    def candidates(self, pod: Pod, node: Node, pools: list[_Pool], alt: Exact) -> list[_Candidate]:
        """The node's devices that match the class's and the request's selectors, in allocator order
        (pool, slice, device); memoised per node and selectors: slices do not change during a simulation.

        A device whose selector fails to evaluate (a CEL runtime error) stays in the list with the error's
        text, where the allocator meets it: it aborts only if the search gets that far (and the device is
        not in use: the allocator checks that first)."""
        key = self._alt_key(alt)
        mine_node = self._candidates.get(node.name)
        if mine_node is None:
            mine_node = self._candidates[node.name] = {}
        hit = mine_node.get(key)
        if hit is None:
            found: list[_Candidate] = []
            warned: list[str] = []
            cls = self.classes[alt.device_class]
            errors = False
            for pool in pools:
                for s in pool.slices:
                    picks, mine = self._slice_verdicts(cls, alt.selectors, key, s)
                    warned.extend(w for w in mine if w not in warned)
                    base = self._slice_candidates(pool.name, s)
                    for k, error in picks:
                        if not error:
                            found.append(base[k])
                        else:
                            b = base[k]
                            found.append(_Candidate(b.driver, b.pool, b.device, error))
                            errors = True
            hit = mine_node[key] = (found, tuple(warned), errors)
        for w in hit[1]:
            self._warn(pod, w)
        return hit[0]

    def has_errors(self, node: Node, alt: Exact) -> bool:
        """Whether a device of the node fails to evaluate the request's selectors (``candidates`` first)."""
        return self._candidates[node.name][self._alt_key(alt)][2]

    def _alt_key(self, alt: Exact) -> int:
        """An int for the request's device class and selectors (equal requests, equal ints), kept per
        request object: hashing selectors costs more than a dict look-up by identity."""
        hit = self._alt_keys.get(id(alt))
        if hit is None or hit[0] is not alt:
            ids = self._alt_ids
            hit = self._alt_keys[id(alt)] = (alt, ids.setdefault((alt.device_class, alt.selectors), len(ids)))
        return hit[1]

    def _slice_candidates(self, pool: str, s: ResourceSlice) -> list[_Candidate]:
        """The slice's devices as candidates, made once: most requests share them."""
        hit = self._slice_cands.get(id(s))
        if hit is None or hit[0] is not s:
            hit = self._slice_cands[id(s)] = (s, [_Candidate(s.driver, pool, d) for d in s.devices])
        return hit[1]

    def _slice_verdicts(self, cls: DeviceClass, sels: tuple[Selector, ...], alt_key: int,
                        s: ResourceSlice) -> tuple[tuple[tuple[int, str], ...], tuple[str, ...]]:
        """The slice's devices that the class's selectors and then the request's select (``alt_key``),
        in slice order, each with the text of the error evaluating it ("" when none), and the warnings
        that gave. Memoised by what the selectors can read of the slice's devices."""
        if all(sel.expression in self._known for sel in sels):
            key: tuple[Any, ...] = (alt_key, self._content(s))
        else:
            key = (alt_key, "slice", id(s))  # an expression compiled since: this slice only (slices live as long)
        hit = self._verdicts.get(key)
        if hit is None:
            warned: list[str] = []
            status: list[bool | str] = [True] * len(s.devices)
            for label, group in ((f"class {cls.name}", cls.selectors), ("claim", sels)):
                for i, sel in enumerate(group):
                    todo = [k for k, v in enumerate(status) if v is True]
                    got = self.evaluator.results(sel.expression, s.driver, [s.devices[k] for k in todo])
                    for k, r in zip(todo, got, strict=True):
                        status[k] = _verdict(r, sel, f"{label}: selector #{i}", warned)
            picks = tuple((k, "" if v is True else v) for k, v in enumerate(status) if v is True or isinstance(v, str))
            hit = self._verdicts[key] = (picks, tuple(warned))
        return hit

    def _content(self, s: ResourceSlice) -> int:
        """What the selectors can read of the slice: its driver, and per device its attribute and capacity
        names and the values of those a selector names (the slice itself when one reads everything)."""
        hit = self._contents.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        names = self._reads
        if names is None:
            key: tuple[Any, ...] = ("slice", id(s))
        else:
            got = self._content_readers
            devices = []
            for d in s.devices:
                attrs, caps = d.attributes, d.capacity
                shape = (tuple(attrs), tuple(caps))
                r = got.get(shape)
                if r is None:
                    r = got[shape] = (len(got), *readers(names, attrs, caps))
                devices.append((r[0], r[1](attrs), r[2](caps)))
            key = (s.driver, tuple(devices))
        ids = self._content_ids
        content = ids.setdefault(key, len(ids))
        self._contents[id(s)] = (s, content)
        return content

    def _warn(self, pod: Pod, text: str) -> None:
        got = self.warnings.setdefault(pod.key, [])
        if text not in got:
            got.append(text)


def _verdict(r: bool | Exception, sel: Selector, label: str, warned: list[str]) -> bool | str:
    if isinstance(r, Unsupported):
        if f"{sel.where}: {r}" not in warned:
            warned.append(f"{sel.where}: {r}")
        return False
    if isinstance(r, Exception):
        return f"{label}: CEL runtime error: {r}"
    return r


def _error_text(c: _Candidate, claim: Claim) -> str:
    """The allocator's error for a device whose selector failed: a request's selector names the claim."""
    if c.error.startswith("claim: "):
        return f"claim {claim.key}: {c.error[len('claim: '):]}"
    return c.error


def _short(alt: Exact) -> str:
    """The request's name as the allocator's errors give it: a sub-request's own name."""
    return alt.name.rpartition("/")[2]


class _Search:
    """One run of the allocator for one pod's claims on one node.

    As the stable allocator: the requests are validated first, in claim and request order (``All``
    counts its devices there, and fails on an incomplete pool; a claim asking for more than 32 devices
    is an error); then a depth-first search, claim by claim, request by request, device by device, takes
    the first solution. A device is in use when a claim holds it, or when this search took it for a
    request without ``adminAccess`` or for any request of the same claim; one taken with ``adminAccess``
    stays free for other claims' admin requests only."""

    def __init__(self, dra: DRA, pod: Pod, claims: list[Claim], node: Node, pools: list[_Pool]) -> None:
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


# --- the scheduler's view: one pod with claims ------------------------------------------------------------


@dataclass
class Outcome:
    node: Any = None  # the NodeState bound to
    reason: str | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)
    prefilter: bool = False  # rejected by PreFilter (PostFilter: no new claims to deallocate)
    # every node's status is UnschedulableAndUnresolvable (PreFilter's, or DynamicResources' Filter on each):
    # DefaultPreemption finds no candidate and says preemption is not helpful on all of them
    unresolvable: bool = False
    rejected: frozenset[int] = frozenset()  # nodes (indexes) DynamicResources' Filter rejected: unresolvable
    no_claims: bool = False  # PreFilter found no claim to allocate (each one not needed): nothing to deallocate


def place(dra: DRA, sched: Any, pod: Pod) -> Outcome:
    """Schedule a pod with resource claims: every default filter, then DynamicResources' Filter, on every
    node; the best-scored node that passes wins (DynamicResources does not score in 1.34). Binds the pod
    and reserves its devices."""
    states = sched.states
    early = sched.before_plugins(pod)
    if early is not None:
        return Outcome(reason=early)
    verdict = dra.prefilter(pod)
    if verdict.enqueue:
        return Outcome(reason=not_enqueued(verdict.message), prefilter=True, unresolvable=True)
    if verdict.message:
        return Outcome(reason=f"0/{len(states)} nodes are available: {verdict.message}.", prefilter=True,
                       unresolvable=True)
    if _lane_ok(sched, pod, verdict.claims):
        try:
            fast = _place_lane(dra, sched, pod, verdict.claims)
        except AllocationError as exc:
            return Outcome(reason=f'running "{PLUGIN}" filter plugin: {exc}')
        if fast is not None:
            return fast
    spec = pod.spec
    topo = None
    counter: Counter[str] = Counter()
    passing = []
    rejected: list[int] = []
    allocations: dict[int, list[list[AllocatedDevice]]] = {}
    for st in states:
        why = filter_reasons(spec, st.node, st.requested, st.pod_count, st.ports)
        if why:
            counter.update(why)
            continue
        if sched.needs_exact(pod):
            if topo is None:
                topo = sched.topology.prepare(pod)
            t = topo.reason(st.node)
            if t is not None:
                counter[t] += 1
                continue
        try:
            reason, alloc = dra.filter(pod, verdict.claims, st.node)
        except AllocationError as exc:
            return Outcome(reason=f'running "{PLUGIN}" filter plugin: {exc}')
        if reason is not None:
            counter[reason] += 1
            rejected.append(st.index)
            continue
        allocations[st.index] = alloc
        passing.append(st)
    if not passing:
        return Outcome(reason=unschedulable_message(len(states), counter), unresolvable=len(rejected) == len(states),
                       rejected=frozenset(rejected), no_claims=not verdict.claims)
    best = sched.best_of(pod, passing)
    return _bound(dra, sched, pod, verdict.claims, best, allocations[best.index])


def _bound(dra: DRA, sched: Any, pod: Pod, claims: list[Claim], best: Any,
           alloc: list[list[AllocatedDevice]]) -> Outcome:
    dra.commit(claims, alloc, best.node)
    sched.bind(pod, best)
    devices = [
        {"claim": c.name, "request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device,
         **({"adminAccess": True} if d.admin_access else {})}
        for c in claims for d in (c.allocation.devices if c.allocation is not None else ())
    ]
    return Outcome(node=best, devices=devices)


# --- the fast lane: pods whose claims are their own, new ones --------------------------------------------


@dataclass
class _Lane:
    """Identical pods (same spec, namespace and claim specs) whose claims are all made for them from
    templates: a max-heap of the nodes their node-only filters pass, by score, kept as the scheduler keeps a
    class's heap.

    kube-scheduler binds the best-scored node among those every filter passes; DynamicResources does not
    score. So the heap's best node that fits and that the allocator can serve is the node kube-scheduler
    picks. A node the allocator cannot serve never can again for this lane (devices are only taken during
    a simulation, and these claims pin nothing): it is dropped for good. An entry is an upper bound of its
    node's score: after most binds a score can only fall (``Scheduler.raised_since``), and a stale entry on
    top is scored again and sinks; a node whose score may have risen (a bind that can raise BalancedAllocation,
    an eviction) is pushed again with its score now at the lane's next turn.

    An entry is one int, ``-score * nodes + rank`` (the node's rank in name order, the tie-break), so the
    heap compares ints; the heap is built again when nodes join (the ranks change).
    """

    heap: list[int] = field(default_factory=list)
    latest: dict[int, int] = field(default_factory=dict)  # node index -> its live entry
    versions: dict[int, int] = field(default_factory=dict)  # node index -> the node's version it scored
    members: list[int] = field(default_factory=list)
    dead: set[int] = field(default_factory=set)
    seen: int = 0
    raised_pos: int = 0
    ranks: list[int] = field(default_factory=list)
    slow: bool = False  # a node with a PreferNoSchedule taint: TaintToleration's score varies
    skey: tuple[int, int, int, int] = (0, 0, 0, 0)  # _score's inputs from the pod
    scores: dict[int, tuple[int, int]] = field(default_factory=dict)  # node index -> (version, score)


def _lane_ok(sched: Any, pod: Pod, claims: list[Claim]) -> bool:
    if pod.spec.preferred or sched.needs_exact(pod):
        return False
    for c in claims:
        if c.allocation is not None or c.owner[1] != pod.name or c.owner[0] != "Pod":
            return False
        if not _spec_lane_ok(c.spec):
            return False
    return True


def _spec_lane_ok(spec: ClaimSpec) -> bool:
    """The allocator's errors before its search (All, more than 32 devices) are for the full path."""
    if sum(max(a.count for a in r.alternatives) for r in spec.requests) > ALLOCATION_RESULTS_MAX:
        return False
    return not any(a.mode == ALL for r in spec.requests for a in r.alternatives)


def _errors_on(dra: DRA, pod: Pod, claims: list[Claim], node: Node) -> bool:
    """Whether a selector of the claims fails on one of the node's devices: kube-scheduler filters every
    node, and such an error on any of them aborts the cycle, so the lane (which stops at the first node that
    serves the pod) is not for these pods."""
    pools = dra._pools(node)
    for c in claims:
        for r in c.spec.requests:
            for a in r.alternatives:
                dra.candidates(pod, node, pools, a)
                if dra.has_errors(node, a):
                    return True
    return False


def _place_lane(dra: DRA, sched: Any, pod: Pod, claims: list[Claim]) -> Outcome | None:
    spec = pod.spec
    # pods of one spec may need different claims (a claim the resourceclaim controller did not create for
    # one of them is not needed): a node dropped for some claims is not dropped for others. Looked up by
    # the objects' identities first (the entry holds them, so an id is not reused), then by value.
    ids = (id(spec), pod.namespace, *[id(c.spec) for c in claims])
    held = dra._lane_ids.get(ids)
    if held is None:
        key = (spec, pod.namespace, tuple(c.spec for c in claims))
        lane = dra._lanes.get(key)
        if lane is None:
            # the score's inputs from the pod (kgpu.sim.scheduler.scheduler.score); lanes that share them share scores
            skey = (spec.nonzero_cpu, spec.nonzero_memory, spec.request(CPU), spec.request(MEMORY))
            lane = dra._lanes[key] = _Lane(raised_pos=sched.raised_length, skey=skey,
                                           scores=dra._scores.setdefault(skey, {}))
        held = dra._lane_ids[ids] = (key, lane)
    lane = held[1]
    states = sched.states
    heap, latest, versions, dead = lane.heap, lane.latest, lane.versions, lane.dead
    skey, memo = lane.skey, lane.scores
    ranks, order = sched.name_ranks()
    n = len(order)

    def entry(idx: int) -> int:
        st = states[idx]
        version = versions[idx] = st.version
        hit = memo.get(idx)
        if hit is None or hit[0] != version:
            hit = memo[idx] = (version, _score(*skey, st))
        e: int = ranks[idx] - hit[1] * n
        latest[idx] = e
        return e

    feasible = sched.feasible_nodes(spec)
    if lane.seen < len(feasible):
        for idx in feasible[lane.seen:]:
            node = states[idx].node
            if any(t.effect == "PreferNoSchedule" for t in node.taints):
                lane.slow = True
            if not lane.slow and _errors_on(dra, pod, claims, node):
                lane.slow = True
            lane.members.append(idx)
        lane.seen = len(feasible)
    if lane.slow:
        return None
    if lane.ranks is not ranks:  # new, or nodes joined: every entry again
        heap[:] = [entry(idx) for idx in lane.members if idx not in dead]
        heapq.heapify(heap)
        lane.ranks, lane.raised_pos = ranks, sched.raised_length
    elif lane.raised_pos < sched.raised_length:
        for idx in set(sched.raised_since(lane.raised_pos)):
            if idx in latest and idx not in dead:
                heapq.heappush(heap, entry(idx))
        lane.raised_pos = sched.raised_length
    heappop, heapreplace = heapq.heappop, heapq.heapreplace
    while heap:
        top = heap[0]
        idx = order[top % n]
        if latest[idx] != top or idx in dead:
            heappop(heap)  # superseded by a newer entry, or dropped
            continue
        st = states[idx]
        if versions[idx] != st.version:
            heapreplace(heap, entry(idx))  # stale: scored again, it sinks to its place
            continue
        if not fits(spec, st):
            heappop(heap)  # pushed again if the node's score may rise (an eviction)
            continue
        reason, alloc = dra.filter(pod, claims, st.node)
        if reason is not None:
            dead.add(idx)
            heappop(heap)
            continue
        # the entry stays: the bind makes it stale, and the next turn scores it again
        return _bound(dra, sched, pod, claims, st, alloc)
    return None


NOT_ENQUEUED = ("kube-scheduler does not try it: {} (DynamicResources' PreEnqueue keeps the pod out of the scheduling "
                "queue until that changes, so there is no FailedScheduling event)")


def not_enqueued(error: str) -> str:
    """What becomes of a pod whose claims PreEnqueue refuses: not kube-scheduler's words (it says nothing)."""
    return NOT_ENQUEUED.format(error)


def postfilter_words(outcome: Outcome) -> str:
    """DynamicResources' PostFilter status for a pod with claims that did not fit: nothing to deallocate when
    PreFilter rejected it or found no claim to allocate (every one not needed), else "still not schedulable"."""
    return NO_CLAIMS if outcome.prefilter or outcome.no_claims else STILL_NOT
