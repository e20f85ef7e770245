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

Here: the plugin's state and its PreFilter and Filter (``DRA``); the allocator's search is in
``dra_allocator``, the scheduling of one pod with claims (and ``not_enqueued``) in ``dra_place``.

Checked against the real plugin by ``conformance/tests/test_dra_differential.py`` (dra-oracle).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    AllocatedDevice,
    Allocation,
    Claim,
    DeviceClass,
    DRAObjects,
    Exact,
    ResourceSlice,
    Selector,
)
from kgpu.model.gpus import slice_devices
from kgpu.model.objects import Node, NodeSelector, Pod, Requirement, Term
from kgpu.model.predicates import node_selector_matches
from kgpu.sim.scheduler.plugins.cel import (
    CelNotBool,
    CelSyntaxError,
    CelTooComplex,
    Evaluator,
    Program,
    Unsupported,
    readers,
)
from kgpu.sim.scheduler.plugins.dra_allocator import (
    SEARCH_STEPS,
    TIMED_OUT,
    AllocationError,
    _Candidate,
    _error_text,
    _Pool,
    _Search,
    _TimedOut,
)

NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
NO_CLAIMS = "no new claims to deallocate"
STILL_NOT = "still not schedulable"
PLUGIN = "DynamicResources"


@dataclass
class Verdict:
    """What DynamicResources says about one pod: the claims (PreFilter) or why not."""

    claims: list[Claim] = field(default_factory=list)
    message: str = ""  # PreFilter's rejection
    enqueue: bool = False  # the rejection is PreEnqueue's too (a claim missing or being deleted): never tried


def all_selectors(objects: DRAObjects) -> list[Selector]:
    """Every CEL selector of the DeviceClasses, ResourceClaims and templates, in that order."""
    out = [s for c in objects.classes.values() for s in c.selectors]
    specs = [c.spec for c in objects.claims.values()] + [t.spec for t in objects.templates.values()]
    out += [s for spec in specs for r in spec.requests for a in r.alternatives for s in a.selectors]
    return out


def compile_selectors(selectors: list[Selector], evaluator: Evaluator) -> list[Program]:
    """Each selector compiled, and checked as the API server checks it when its object is created (it
    compiles, it is a bool, it is under the cost limit); the first that fails is bad input naming it."""
    programs = []
    for sel in selectors:
        try:
            programs.append(evaluator.program(sel.expression))
            programs[-1].check()
        except CelNotBool as exc:
            raise InputError(f"Invalid value: {quote(sel.expression)}: {exc}", where=sel.where) from None
        except CelTooComplex as exc:  # the API server's words: Forbidden, "too complex, exceeds cost limit"
            raise InputError(f"Forbidden: {exc}", where=sel.where) from None
        except CelSyntaxError as exc:
            raise InputError(f"compilation failed: {exc}", where=sel.where) from None
    return programs


class DRA:
    """The cluster's DRA state during a simulation: classes, claims, slices and the devices in use."""

    def __init__(self, objects: DRAObjects) -> None:
        self.objects = objects
        self.classes = objects.classes
        # claims to allocate are copies: ``commit`` allocates them, and ``objects`` is the input's, read once
        # (kgpu.model.inputs.Objects.dra_objects) and shared with other readers
        self.claims: dict[str, Claim] = {
            k: c if c.allocation is not None else replace(c) for k, c in objects.claims.items()
        }
        self.templates = objects.templates
        self.evaluator = Evaluator()
        self.warnings: dict[str, list[str]] = {}  # pod key -> unsupported selectors it met
        self._unsupported: set[str] = set()
        programs = compile_selectors(all_selectors(objects), self.evaluator)
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


# --- the scheduler's view: one pod with claims ------------------------------------------------------------


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




__all__ = ["CANNOT_ALLOCATE", "DRA", "SEARCH_STEPS", "TIMED_OUT", "AllocationError", "Verdict"]
