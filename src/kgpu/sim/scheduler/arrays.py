"""Array mode of kube-scheduler's placement loop: with many pod classes, each class keeps the exact score of
every node in a numpy array and re-scores, in one vectorised step, only the nodes bound since its previous
turn (kgpu.sim.scheduler.scheduler's docstring: why, and when a class enters it). ``ArrayMode`` holds the
``Scheduler``'s methods for it (the scheduler inherits them); ``_NodeArrays`` the per-node arrays every
class reads (free resources, requests, ports, name rank)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kgpu.model.objects import Pod, PodSpecInfo
from kgpu.model.predicates import (
    ERR_AFFINITY_CONFLICT,
    ERR_TOO_MANY_PODS,
    unschedulable_message,
)
from kgpu.sim.scheduler.classes import (
    ARRAY_LIMIT,
    NO_NODES,
    SMALL_REFRESH,
    Decision,
    NodeState,
    _Class,
    _score,
    fits,
)
from kgpu.sim.scheduler.plugins.scoring import (
    MAX_NODE_SCORE,
    NODE_AFFINITY,
    STATIC_PLUGINS,
)
from kgpu.sim.scheduler.plugins.topology import REASONS as TOPOLOGY_REASONS
from kgpu.sim.scheduler.plugins.topology import Topology


class ArrayMode:
    """The array-mode part of ``kgpu.sim.scheduler.scheduler.Scheduler``, which it is a base of."""

    states: list[NodeState]
    by_name: dict[str, NodeState]
    topology: Topology
    _array_after: int
    _arrays: _NodeArrays | None
    _classes: dict[PodSpecInfo, _Class]

    if TYPE_CHECKING:  # the Scheduler's own, which these methods call

        def _new_class(self, spec: PodSpecInfo) -> _Class: ...
        def _class(self, spec: PodSpecInfo, cls: _Class | None = None) -> _Class: ...
        def _static_raws(self, cls: _Class, idx: int) -> tuple[int, int]: ...
        def bind(self, pod: Pod, st: NodeState) -> None: ...
        def explain(self, cls: _Class) -> str: ...
        def needs_exact(self, pod: Pod) -> bool: ...

    def _exact_in_array(self, cls: _Class) -> bool:
        """An exact-path class keeps its scores in array mode whatever the number of classes (when its
        quantities allow), so each of its pods costs a few vectorised passes over the nodes."""
        if cls.scores is None and self._array_after != sys.maxsize and self._array_ok(cls.spec):
            self._to_array_mode(cls)
        if cls.scores is not None:
            self._class(cls.spec, cls)  # catch up the array, or step back to heaps
        return cls.scores is not None

    def _evaluate_array(self, pod: Pod, cls: _Class, always: bool = False) -> tuple[Any, str]:
        """``_evaluate`` over the class's score array: the nodes that pass every filter (a mask), or the
        message when none does (or ``always``)."""
        import numpy as np

        n = len(self.states)
        if not n:
            return None, NO_NODES
        group = cls.group
        if group.flt.names is not None and not group.flt.names:
            return None, f"0/{n} nodes are available: {ERR_AFFINITY_CONFLICT}."
        self._refresh_array(cls)
        view = cls.scores[:n]
        fit = view >= 0
        if not fit.any():
            # No node passes the node-only filters and has room: the topology filters run on none of them,
            # and the message is the class's, kept while nothing is bound (what leaves pods pending fast).
            return None, self._explain_array(cls)
        code = self.topology.prepare(pod).codes(self.topology.domain_ids)
        ok = fit & (code == 0)
        if not always and ok.any():
            return ok, ""
        arrays = self._arrays
        assert arrays is not None
        counts = group.static_counter + arrays.reasons(cls, np.array(group.feasible, dtype=np.int64))
        for c, k in enumerate(np.bincount(code[fit], minlength=len(TOPOLOGY_REASONS)).tolist()):
            if c and k:
                counts[TOPOLOGY_REASONS[c]] += k
        return (ok if ok.any() else None), unschedulable_message(n, counts)

    def _place_exact_array(self, pod: Pod, cls: _Class) -> Decision:
        ok, message = self._evaluate_array(pod, cls)
        if ok is None:
            return Decision(None, message)
        st = self._best_array(pod, cls, ok)
        self.bind(pod, st)
        return Decision(st, None)

    def _best_array(self, pod: Pod, cls: _Class, ok: Any) -> NodeState:
        """The best of the nodes where ``ok`` holds (each passes every filter for the pod), from the class's
        score array: ``_best`` vectorised (the same integer and float operations)."""
        import numpy as np

        n = len(self.states)
        view = cls.scores[:n]
        arrays = self._arrays
        assert arrays is not None
        if cls.raws is not None:
            # varying class: TaintToleration and NodeAffinity normalised over the nodes that pass every filter
            view = view.copy()
            for plugin, raw in zip(STATIC_PLUGINS, cls.raws, strict=True):
                if plugin is NODE_AFFINITY and not cls.spec.preferred:
                    continue  # 0 on every node
                view += plugin.weight * plugin.normalize_array(raw[:n], ok)
        if self.topology.scored(pod):
            idx = np.flatnonzero(ok)
            totals = view[idx]
            extra = self.topology.scores_at(pod, idx) if len(idx) > 1 else None
            if extra is not None:
                totals = totals + extra
            ties = np.flatnonzero(totals == totals.max())
            best = ties[0] if len(ties) == 1 else ties[arrays.name_rank(self.states)[idx[ties]].argmin()]
            st = self.states[int(idx[best])]
        else:
            masked = np.where(ok, view, -1)
            top = int(masked.argmax())
            ties = np.flatnonzero(masked == masked[top])
            if len(ties) > 1:
                top = int(ties[arrays.name_rank(self.states)[ties].argmin()])
            st = self.states[top]
        return st

    def fit_mask(self, pod: Pod) -> Any:
        """The node-only filters, NodePorts and NodeResourcesFit as a numpy bool per node, from the class's
        score array; None when the class cannot keep one (host ports, quantities numpy cannot hold)."""
        if not self.states or self._array_after == sys.maxsize:
            return None
        cls = self._classes.get(pod.spec) or self._new_class(pod.spec)
        if not self._exact_in_array(cls):
            return None
        self._refresh_array(cls)
        return cls.scores[: len(self.states)] >= 0

    def resource_reasons(self, spec: PodSpecInfo, idx: Any) -> Counter[str]:
        """NodeResourcesFit's reasons over the nodes ``idx`` (a numpy array), counted, for a class
        ``fit_mask`` gave an array."""
        assert self._arrays is not None
        return self._arrays.reasons(self._classes[spec], idx)

    def passing(self, pod: Pod) -> Any:
        """Every filter the scheduler runs (the node-only ones, NodePorts and NodeResourcesFit, and for a pod
        on the exact path PodTopologySpread and InterPodAffinity) as a numpy bool per node, from the class's
        score array; None when the class cannot keep one (``fit_mask``)."""
        ok = self.fit_mask(pod)
        if ok is None:
            return None
        if ok.any() and self.needs_exact(pod):
            ok &= self.topology.prepare(pod).codes(self.topology.domain_ids) == 0
        return ok

    def best_in(self, pod: Pod, ok: Any) -> NodeState:
        """The best-scored of the nodes where ``ok`` holds (each passes every filter for the pod), after
        ``passing`` gave the pod's class an array."""
        cls = self._classes[pod.spec]
        assert cls.scores is not None
        return self._best_array(pod, cls, ok)

    def _array_ok(self, spec: PodSpecInfo) -> bool:
        """Array mode needs integers numpy holds exactly; host ports stay on the heap path."""
        if spec.host_ports:
            return False
        limit = ARRAY_LIMIT
        if max(spec.nonzero_cpu, spec.nonzero_memory, *(v for _, v in spec.requests), 0) >= limit:
            return False
        if self._arrays is None:
            big = (
                max(st.alloc_cpu, st.alloc_memory, st.nonzero_cpu, st.nonzero_memory) for st in self.states
            )
            if any(v >= limit for v in big):
                self._array_after = sys.maxsize
                return False
            self._arrays = _NodeArrays(self.states)
        if not self._arrays.ok:
            self._array_after = sys.maxsize
        return self._arrays.ok

    def _to_array_mode(self, cls: _Class) -> None:
        """From now on the class keeps every node's exact score in an array and re-scores, at each of its
        turns, the nodes bound since its last one: no work per bind, whatever the number of classes."""
        import numpy as np

        assert self._arrays is not None
        for name, _ in cls.spec.requests:
            self._arrays.track(name)
        cls.heap, cls.latest = [], {}  # bind skips the class in the node lists it is still in
        cls.scores = np.full(max(16, len(self.states)), -1, dtype=np.int64)
        if cls.varies:
            cls.raws = [np.zeros(len(cls.scores), dtype=np.int64) for _ in STATIC_PLUGINS]
            cls.extra_cache = {}
        cls.pos = 0
        cls.vec_log_pos = self._arrays.log_n
        cls.msg, cls.log_pos = None, -1  # from now on log_pos counts the arrays' log

    def _catch_up_array(self, cls: _Class) -> None:
        import numpy as np

        arrays = self._arrays
        assert arrays is not None
        group = cls.group
        if group.seen < len(self.states):
            group.catch_up(self.states, self.by_name)
        if len(cls.scores) < len(self.states):
            size = max(len(self.states), 2 * len(cls.scores))
            grown = np.full(size, -1, dtype=np.int64)
            grown[: len(cls.scores)] = cls.scores
            cls.scores = grown
            if cls.raws is not None:
                for i, raw in enumerate(cls.raws):
                    cls.raws[i] = np.zeros(size, dtype=np.int64)
                    cls.raws[i][: len(raw)] = raw
        feasible = group.feasible
        if cls.pos < len(feasible):
            fresh = np.array(feasible[cls.pos :], dtype=np.int64)
            cls.scores[fresh] = arrays.scores(cls, fresh)
            if cls.raws is not None:
                cls.extra_cache = {}
                raws = [self._static_raws(cls, idx) for idx in feasible[cls.pos :]]
                for i, raw in enumerate(cls.raws):
                    raw[fresh] = [r[i] for r in raws]
            cls.new.extend(feasible[cls.pos :])
            cls.pos = len(feasible)

    def _explain_array(self, cls: _Class) -> str:
        import numpy as np

        self._catch_up_array(cls)
        arrays = self._arrays
        assert arrays is not None
        if cls.msg is not None and cls.log_pos == arrays.log_n and cls.msg_nodes == len(self.states):
            return cls.msg
        feasible = np.array(cls.group.feasible, dtype=np.int64)
        counts = cls.group.static_counter + arrays.reasons(cls, feasible)
        cls.msg = unschedulable_message(len(self.states), counts)
        cls.msg_nodes, cls.log_pos = len(self.states), arrays.log_n
        cls.new = []
        return cls.msg

    def _place_array(self, pod: Pod, cls: _Class) -> Decision:
        import numpy as np

        arrays = self._arrays
        assert arrays is not None
        scores = cls.scores
        self._refresh_array(cls)
        n = len(self.states)
        view = scores[:n]
        if cls.raws is not None and n:
            # varying class: add the normalised plugins over the nodes that are feasible now. DefaultNormalizeScore
            # depends only on the largest raw score among them, which rarely changes: the weighted sum is kept
            # per such maxima (and number of nodes) until the class takes in new nodes.
            fit = view >= 0
            used = [
                (p, raw[:n])
                for p, raw in zip(STATIC_PLUGINS, cls.raws, strict=True)
                if p is not NODE_AFFINITY or cls.spec.preferred
            ]
            tops = (n, *(int(raw.max(where=fit, initial=0)) for _, raw in used))
            extra = cls.extra_cache.get(tops)
            if extra is None:
                extra = cls.extra_cache[tops] = sum(p.weight * p.normalize_array(raw, fit) for p, raw in used)
            view = np.where(fit, view + extra, -1)
        best = int(view.argmax()) if n else 0
        if not n or view[best] < 0:
            return Decision(None, self.explain(cls))
        ties = np.flatnonzero(view == view[best])
        if len(ties) > 1:
            best = int(ties[arrays.name_rank(self.states)[ties].argmin()])
        st = self.states[best]
        self.bind(pod, st)
        return Decision(st, None)

    def _refresh_array(self, cls: _Class) -> None:
        """Re-score, in the class's array, the nodes bound since its last turn."""
        arrays = self._arrays
        assert arrays is not None
        scores = cls.scores
        n_log = arrays.log_n
        if cls.vec_log_pos < n_log:
            changed = arrays.log[cls.vec_log_pos : n_log]
            cls.vec_log_pos = n_log
            if len(changed) <= SMALL_REFRESH:
                # A class placing its pods one after another sees a node or two change between its turns:
                # _score and fits on those, the same integer and float operations as arrays.scores.
                states, spec = self.states, cls.spec
                nz_cpu, nz_memory, req_cpu, req_memory = cls.score_key
                for idx in changed.tolist():
                    if scores[idx] >= 0:  # infeasible and unfit nodes stay out for good
                        st = states[idx]
                        scores[idx] = (
                            _score(nz_cpu, nz_memory, req_cpu, req_memory, st) if fits(spec, st) else -1
                        )
                return
            changed = changed[scores[changed] >= 0]  # infeasible and unfit nodes stay out for good
            if len(changed):
                scores[changed] = arrays.scores(cls, changed)


class _NodeArrays:
    """Every node's allocatable, requests and free resources as numpy arrays, kept current on each bind."""

    def __init__(self, states: Sequence[NodeState]) -> None:
        import numpy as np

        self.np = np
        self.n = 0
        cap = max(64, 2 * len(states))
        self.cols: dict[str, Any] = {
            k: np.zeros(cap, dtype=np.int64) for k in ("ac", "am", "nzc", "nzm", "rc", "rm", "pods")
        }
        self.free: dict[str, Any] = {}
        self.states = states
        self.ok = True
        self.log = np.zeros(1024, dtype=np.int64)  # node index of every bind since the arrays exist
        self.log_n = 0
        self._rank: Any = None
        self._rank_n = -1
        for st in states:
            self.add(st)

    def _grow(self, need: int) -> None:
        np = self.np
        for table in (self.cols, self.free):
            for k, arr in table.items():
                if len(arr) < need:
                    grown = np.zeros(max(need, 2 * len(arr)), dtype=np.int64)
                    grown[: len(arr)] = arr
                    table[k] = grown

    def add(self, st: NodeState) -> None:
        i = st.index
        self._grow(i + 1)
        if max(st.alloc_cpu, st.alloc_memory) >= ARRAY_LIMIT:
            self.ok = False
        self.n = max(self.n, i + 1)
        self._set(st)
        for name, arr in self.free.items():
            arr[i] = st.available.get(name, 0)

    def _set(self, st: NodeState) -> None:
        c, i = self.cols, st.index
        c["ac"][i], c["am"][i] = st.alloc_cpu, st.alloc_memory
        c["nzc"][i], c["nzm"][i] = st.nonzero_cpu, st.nonzero_memory
        c["rc"][i], c["rm"][i] = st.req_cpu, st.req_memory
        c["pods"][i] = st.alloc_pods - st.pod_count

    def track(self, name: str) -> None:
        """Keep ``name``'s free amount per node (a class that requests it is in array mode)."""
        if name in self.free:
            return
        np = self.np
        arr = np.zeros(len(self.cols["ac"]), dtype=np.int64)
        self.free[name] = arr
        for st in self.states:
            arr[st.index] = st.available.get(name, 0)

    def bound(self, spec: PodSpecInfo, st: NodeState) -> None:
        """``spec`` was bound to ``st`` or evicted from it: log the node and copy its new figures."""
        if self.log_n == len(self.log):
            grown = self.np.zeros(2 * len(self.log), dtype=self.np.int64)
            grown[: self.log_n] = self.log
            self.log = grown
        self.log[self.log_n] = st.index
        self.log_n += 1
        self._set(st)
        for name, _ in spec.requests:
            arr = self.free.get(name)
            if arr is not None:
                arr[st.index] = st.available.get(name, 0)

    def reasons(self, cls: _Class, feasible: Any) -> Counter[str]:
        """NodeResourcesFit's reasons over the class's feasible nodes, counted (no host ports here)."""
        out: Counter[str] = Counter()
        n = int((self.cols["pods"][feasible] <= 0).sum())
        if n:
            out[ERR_TOO_MANY_PODS] = n
        for name, amount, text in cls.reqs:
            n = int((self.free[name][feasible] < amount).sum())
            if n:
                out[text] += n
        return out

    def name_rank(self, states: Sequence[NodeState]) -> Any:
        if self._rank_n != len(states):
            np = self.np
            order = sorted(range(len(states)), key=lambda i: states[i].node.name)
            rank = np.empty(len(states), dtype=np.int64)
            rank[np.array(order, dtype=np.int64)] = np.arange(len(states), dtype=np.int64)
            self._rank, self._rank_n = rank, len(states)
        return self._rank

    def scores(self, cls: _Class, idx: Any) -> Any:
        """``_score`` of the class on the nodes ``idx``, exactly (same integer and float operations), and
        -1 where the class does not fit (NodeResourcesFit; host-port classes never come here)."""
        np = self.np
        c = self.cols
        nz_cpu, nz_memory, req_cpu, req_memory = cls.score_key
        ac, am = c["ac"][idx], c["am"][idx]
        has_c, has_m = ac > 0, am > 0
        safe_c, safe_m = np.where(has_c, ac, 1), np.where(has_m, am, 1)
        r = c["nzc"][idx] + nz_cpu
        least_c = np.where(has_c & (r <= ac), (ac - r) * MAX_NODE_SCORE // safe_c, 0)
        r = c["nzm"][idx] + nz_memory
        least_m = np.where(has_m & (r <= am), (am - r) * MAX_NODE_SCORE // safe_m, 0)
        count = has_c.astype(np.int64) + has_m.astype(np.int64)
        total = np.where(count > 0, (least_c + least_m) // np.where(count > 0, count, 1), 0)
        if req_cpu or req_memory:
            f_cpu = np.minimum(1.0, (c["rc"][idx] + req_cpu).astype(np.float64) / safe_c.astype(np.float64))
            f_memory = np.minimum(
                1.0, (c["rm"][idx] + req_memory).astype(np.float64) / safe_m.astype(np.float64)
            )
            std = np.where(has_c & has_m, np.abs((f_cpu - f_memory) / 2), 0.0)
            total = total + np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        fit = c["pods"][idx] > 0
        for name, amount in cls.spec.requests:
            fit &= self.free[name][idx] >= amount
        return np.where(fit, total, -1)
