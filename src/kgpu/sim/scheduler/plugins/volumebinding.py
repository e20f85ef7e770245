"""Pods with PersistentVolumeClaims: kube-scheduler's VolumeRestrictions, VolumeBinding and VolumeZone.

Only pods whose spec names a claim come here (``kgpu.sim.simulate`` sends them to
``kgpu.sim.scheduler.plugins.volumeplace``, when the input holds any PersistentVolumeClaim, PersistentVolume
or StorageClass); every other pod keeps the scheduler's fast paths and pays nothing. The plugins as
k8s.io/kubernetes v1.34 runs them (pkg/scheduler/framework/plugins/volumerestrictions, volumebinding,
volumezone; k8s.io/component-helpers storage/volume), in the default profile's order, with their own
words:

PreFilter (one answer for every node, UnschedulableAndUnresolvable):
  a claim that does not exist: ``persistentvolumeclaim "data" not found``; a Lost claim, one being
  deleted; a claim not fully bound whose class is not WaitForFirstConsumer (no class, a class that does
  not exist, or Immediate): ``pod has unbound immediate PersistentVolumeClaims``; a bound claim whose
  volume does not exist (VolumeZone's PreFilter): ``persistentvolume "pv" not found``.
Filter, per node, the first failing plugin's reasons:
  VolumeRestrictions: a ReadWriteOncePod claim another pod already uses, on every node;
  VolumeBinding: a bound claim's volume whose ``nodeAffinity`` the node does not match (``node(s) didn't
  match PersistentVolume's node affinity``); a WaitForFirstConsumer claim that can neither bind an
  Available volume that fits (class, capacity, access modes, node affinity; the smallest wins) nor be
  provisioned on the node (a provisioner, and ``allowedTopologies`` matching the node), or that is
  being provisioned for another node (``volume.kubernetes.io/selected-node``): ``node(s) didn't find
  available persistent volumes to bind``;
  VolumeZone: a bound volume's zone or region labels the node's do not carry (``node(s) had no
  available volume zone``); nodes without any zone or region label pass.
Bind: a WaitForFirstConsumer claim binds on the chosen node: to the volume matched there, or to a new one
  the provisioner creates in the node's zone (a zonal provisioner: EBS, GCE PD, Azure Disk, TKE CBS) or
  reachable from anywhere (EFS, FSx for Lustre, NFS, Azure Files, Filestore). Later pods that share the
  claim follow its volume.

The EBS CSI driver's volumes carry ``topology.ebs.csi.aws.com/zone`` in their node affinity; its node
plugin, which runs on every EKS node, labels the node with it. A node without that label (kgpu's own new
nodes, a node read from a profile) is read as carrying it with its ``topology.kubernetes.io/zone``, as
Karpenter reads it (its normalised labels).

Provisioners (``for_provisioner``) see a pod with its volumes' topology added to its required node
affinity, as Karpenter's volume topology does: a bound volume's node affinity, a WaitForFirstConsumer
claim's class's ``allowedTopologies``. So Karpenter and cluster-autoscaler grow nodes in the volume's
zone. Pods the volume PreFilter rejects are not handed to them (Karpenter ignores a pod whose claim it
cannot validate; cluster-autoscaler runs the same PreFilter).

Not modelled, and said per pod under the ``volumes`` code: the topology of volumes from a provisioner kgpu
does not know; an Immediate claim from a zonal provisioner without one allowed zone (the driver picks the
zone before the pod is placed). Not modelled and documented: NodeVolumeLimits (attach limits, CSINode),
storage capacity (CSIStorageCapacity), in-tree inline volumes' disk conflicts, claims' label selectors.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from typing import Any

from kgpu.model.objects import Node, NodeSelector, Pod, PodSpecInfo, Requirement, Term
from kgpu.model.predicates import (
    node_selector_matches,
)
from kgpu.model.volumes import NO_PROVISIONER, WAIT, Claim, StorageObjects, Volume, from_template

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)  # VolumeZone's topologyLabels
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}

# Provisioners whose volumes live in one zone (their CSI driver reports the zone as the volume's topology).
ZONAL = frozenset({
    "ebs.csi.aws.com", "kubernetes.io/aws-ebs", "pd.csi.storage.gke.io", "kubernetes.io/gce-pd",
    "disk.csi.azure.com", "kubernetes.io/azure-disk", "com.tencent.cloud.csi.cbs",
})
# Provisioners whose volumes every node reaches (no topology on the volume).
ANYWHERE = frozenset({
    "efs.csi.aws.com", "fsx.csi.aws.com", "file.csi.azure.com", "kubernetes.io/azure-file",
    "filestore.csi.storage.gke.io", "nfs.csi.k8s.io", "com.tencent.cloud.csi.cfs", "s3.csi.aws.com",
})

ERR_NOT_FOUND = 'persistentvolumeclaim "{}" not found'
ERR_LOST = 'persistentvolumeclaim "{}" bound to non-existent persistentvolume "{}"'
ERR_DELETING = 'persistentvolumeclaim "{}" is being deleted'
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ERR_PV_NOT_FOUND = 'persistentvolume "{}" not found'
RWOP = "ReadWriteOncePod"
ERR_RWOP = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use "
            "by another pod")
ERR_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_ZONE_CONFLICT = "node(s) had no available volume zone"
# Reasons DefaultPreemption cannot help with (UnschedulableAndUnresolvable)
UNRESOLVABLE = frozenset({ERR_NODE_CONFLICT, ERR_BIND_CONFLICT, ERR_PV_NOT_EXIST, ERR_ZONE_CONFLICT})


@dataclass
class Verdict:
    message: str | None = None  # PreFilter's rejection
    claims: list[Claim] = field(default_factory=list)


def node_labels(node: Node) -> Mapping[str, str]:
    """The labels volume affinity is matched against: the node's, plus the EBS CSI driver's zone label where
    the node has a zone but not that label (see the module docstring)."""
    labels = node.labels
    zone = labels.get(ZONE)
    if zone is not None and EBS_ZONE not in labels:
        return {**labels, EBS_ZONE: zone}
    return labels


class VolumeState:
    """Claims, volumes and classes as the simulation binds them."""

    def __init__(self, objects: StorageObjects, bound: Iterable[Pod] = ()) -> None:
        # ``objects`` is the input's, read once (kgpu.model.inputs.Objects.storage_objects) and shared with
        # other readers: binding works on copies of the dicts, the claims not bound yet and the volumes not
        # Bound (a Bound volume a binding picks is pre-bound to that claim: it is written the values it has)
        self.objects = StorageObjects(
            claims={k: _replace(c) if not self._bound(c) else c for k, c in objects.claims.items()},
            volumes={k: _replace(v) if v.phase != "Bound" else v for k, v in objects.volumes.items()},
            classes=objects.classes,
            warnings=objects.warnings,
        )
        objects = self.objects
        self.default_class = objects.default_class()
        self.users: Counter[tuple[str, str]] = Counter()  # pods using each claim (ReadWriteOncePod)
        self.warnings: dict[str, list[str]] = {}
        self._provision_notes: dict[tuple[str, str], str] = {}
        # what FindMatchingVolume can pick: Available volumes without a claimRef, by class, and volumes whose
        # claimRef names a claim; a bind takes a volume out of the first (new volumes are Bound already)
        self._available: dict[str, list[Volume]] = {}
        self._prebound: dict[tuple[str, str], Volume] = {}
        for pv in objects.volumes.values():
            if pv.claim_ref is not None and pv.claim_ref[1]:
                self._prebound.setdefault(pv.claim_ref, pv)
            elif pv.phase == "Available":
                self._available.setdefault(pv.storage_class, []).append(pv)
        self._specs: dict[tuple[int, NodeSelector], tuple[PodSpecInfo, PodSpecInfo]] = {}
        # per tuple of label keys: every combination of their values seen on a node, and each node's (passes)
        self._label_values: dict[tuple[str, ...], dict[tuple[str | None, ...], int]] = {}
        self._label_id_arrays: dict[tuple[str, ...], Any] = {}
        for pod in bound:
            for c in self._names(pod):
                self.users[c] += 1
        self._bind_immediate()

    # --- claims -----------------------------------------------------------------------------------------

    def in_use(self, claim: Claim) -> bool:
        """Whether a scheduled pod uses the claim (the scheduler's StorageInfos().IsPVCUsedByPods)."""
        return self.users[claim.key] > 0

    def signature(self, claims: list[Claim]) -> tuple[Any, ...]:
        """What the volume plugins read of ``claims`` for a node (their state now): pods whose claims share
        it get the same answers (``kgpu.sim.scheduler.plugins.defaultpreemption`` keeps its own by it)."""
        out = []
        for c in claims:
            mine = self._prebound.get(c.key)
            out.append((c.volume_name if self._bound(c) else None, c.storage_class, c.storage,
                        tuple(c.access_modes), c.selected_node, mine.name if mine is not None else None,
                        RWOP in c.access_modes and self.users[c.key] > 0))
        return tuple(out)

    def release_pod(self, pod: Pod) -> None:
        """A pod that was bound is gone (evicted): its claims count one user less."""
        for key in self._names(pod):
            if self.users[key] > 0:
                self.users[key] -= 1

    def _names(self, pod: Pod) -> list[tuple[str, str]]:
        out = []
        by_entry = {f"{t.kind} {t.name}": t for t in pod.spec.claim_templates}
        for entry in pod.spec.volume_claims:
            kind, _, name = entry.partition(" ")
            if kind == "pvc":
                out.append((pod.namespace, name))
            elif entry in by_entry:
                out.append((pod.namespace, by_entry[entry].claim_name(pod.name)))
        return out

    def _bound(self, c: Claim) -> bool:
        return bool(c.volume_name) and c.phase == "Bound"

    def _bind_immediate(self) -> None:
        """What the PV controller does to claims of Immediate classes before any pod asks: a claim written
        without a status binds an Available volume that fits, else its class's provisioner creates one."""
        objs = self.objects
        for claim in objs.claims.values():
            if claim.volume_name or claim.phase != "Pending" or claim.status_given:
                continue
            cls = objs.classes.get(claim.storage_class)
            if cls is not None and cls.binding_mode == WAIT:
                continue
            pv = self._match(claim, None)
            if pv is not None:
                self._bind(claim, pv)
                continue
            if cls is None or cls.provisioner == NO_PROVISIONER:
                continue
            affinity = None
            if cls.provisioner in ZONAL:
                zones = _single_zone(cls.allowed_topologies)
                if zones is not None:
                    affinity = zones
                else:
                    self._provision_notes[claim.key] = (
                        f"claim {claim.name}: StorageClass {cls.name} binds Immediate, so {cls.provisioner} picks the "
                        "volume's zone before the pod is placed; kgpu does not know which (placed as if any zone)"
                    )
            self._bind(claim, self._new_volume(claim, affinity))

    def _claim(self, pod: Pod, entry: str) -> tuple[Claim | None, str]:
        kind, _, name = entry.partition(" ")
        claims = self.objects.claims
        if kind == "pvc":
            return claims.get((pod.namespace, name)), name
        for t in pod.spec.claim_templates:
            if f"{t.kind} {t.name}" == entry:
                cname = t.claim_name(pod.name)
                claim = claims.get((pod.namespace, cname))
                if claim is None:  # the StatefulSet or the ephemeral volume controller creates it
                    claim = claims[(pod.namespace, cname)] = from_template(t, pod.namespace, pod.name, self.default_class)
                return claim, cname
        return None, name

    def prefilter(self, pod: Pod) -> Verdict:
        claims = []
        for entry in pod.spec.volume_claims:
            claim, name = self._claim(pod, entry)
            if claim is None:
                return Verdict(ERR_NOT_FOUND.format(name))
            if claim.phase == "Lost":
                return Verdict(ERR_LOST.format(claim.name, claim.volume_name))
            if claim.deleting:
                return Verdict(ERR_DELETING.format(claim.name))
            claims.append(claim)
        classes = self.objects.classes
        for c in claims:
            if self._bound(c):
                continue
            cls = classes.get(c.storage_class)
            if c.volume_name or cls is None or cls.binding_mode != WAIT:
                return Verdict(ERR_UNBOUND_IMMEDIATE, claims)
        for c in claims:
            if self._bound(c) and c.volume_name not in self.objects.volumes:
                # VolumeBinding's Filter says so on every node; VolumeZone's PreFilter fails first
                return Verdict(ERR_PV_NOT_FOUND.format(c.volume_name), claims)
        return Verdict(None, claims)

    # --- filter -----------------------------------------------------------------------------------------

    def filter(self, pod: Pod, claims: list[Claim], node: Node, rwop: bool = True) -> tuple[str, ...]:
        """The reasons the first failing volume plugin gives for ``node`` (empty: it passes). ``rwop``
        False: without VolumeRestrictions' ReadWriteOncePod check (preemption's dry run counts it itself)."""
        for c in claims:
            if rwop and RWOP in c.access_modes and self.users[c.key]:
                return (ERR_RWOP,)
        labels = node_labels(node)
        volumes = self.objects.volumes
        node_ok = True
        bind_ok = True
        for c in claims:
            if self._bound(c):
                pv = volumes.get(c.volume_name)
                if pv is not None and pv.node_affinity is not None and not node_selector_matches(pv.node_affinity, labels, node.name):
                    node_ok = False
                    break
        chosen: dict[str, Volume] = {}
        for c in sorted((c for c in claims if not self._bound(c)), key=lambda c: c.storage):
            if c.selected_node and c.selected_node != node.name:
                bind_ok = False
                break
            if not c.selected_node:
                pv = self._match(c, node, chosen)
                if pv is not None:
                    chosen[pv.name] = pv
                    continue
            cls = self.objects.classes.get(c.storage_class)
            if cls is None or cls.provisioner in ("", NO_PROVISIONER):
                bind_ok = False
                break
            if cls.allowed_topologies is not None and not node_selector_matches(cls.allowed_topologies, labels, node.name):
                bind_ok = False
                break
        reasons = []
        if not node_ok:
            reasons.append(ERR_NODE_CONFLICT)
        if not bind_ok:
            reasons.append(ERR_BIND_CONFLICT)
        if reasons:
            return tuple(reasons)
        if any(k in node.labels for k in TOPOLOGY_LABELS):
            for c in claims:
                if not self._bound(c):
                    continue
                pv = volumes[c.volume_name]
                for key in TOPOLOGY_LABELS:
                    value = pv.labels.get(key)
                    if value is None:
                        continue
                    have = node.labels.get(key, node.labels.get(_GA.get(key, key)))
                    if have is None or have not in set(value.split("__")):
                        return (ERR_ZONE_CONFLICT,)
        return ()

    def _reads(self, claims: list[Claim]) -> tuple[tuple[str, ...], bool]:
        """What ``filter`` reads of a node for ``claims``: the labels its volumes' and classes' node affinity
        name (the volumes it may bind included), the zone and region labels; and whether the node's name
        (a term with matchFields, a claim with a selected node)."""
        keys = set(TOPOLOGY_LABELS) | {ZONE, EBS_ZONE}
        by_name = False
        volumes, classes = self.objects.volumes, self.objects.classes
        selectors: list[NodeSelector | None] = []
        for c in claims:
            by_name = by_name or bool(c.selected_node)
            if self._bound(c):
                pv = volumes.get(c.volume_name)
                selectors.append(pv.node_affinity if pv is not None else None)
                continue
            mine = self._prebound.get(c.key)
            selectors.append(mine.node_affinity if mine is not None else None)
            selectors.extend(pv.node_affinity for pv in self._available.get(c.storage_class, ()))
            cls = classes.get(c.storage_class)
            selectors.append(cls.allowed_topologies if cls is not None else None)
        for sel in selectors:
            for term in sel.terms if sel is not None else ():
                keys.update(r.key for r in term.match_expressions)
                by_name = by_name or bool(term.match_fields)
        return tuple(sorted(keys)), by_name

    def filter_memo(
        self, pod: Pod, claims: list[Claim], rwop: bool = True
    ) -> Callable[[Node], tuple[str, ...]]:
        """``filter`` for ``pod`` and ``claims`` as a function of the node, memoised on what it reads of a
        node (``_reads``). For one scheduling attempt: the claims and volumes must not change meanwhile."""
        read, by_name = self._reads(claims)
        memo: dict[tuple[str | None, ...], tuple[str, ...]] = {}

        def check(node: Node) -> tuple[str, ...]:
            labels = node.labels
            key: tuple[str | None, ...] = tuple([labels.get(k) for k in read])
            if by_name:
                key += (node.name,)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = self.filter(pod, claims, node, rwop)
            return hit

        return check

    def passes(self, pod: Pod, claims: list[Claim], states: Sequence[Any], idx: Any) -> Any:
        """Whether the volume plugins pass each node of ``idx`` (a numpy array of node indexes), as a numpy
        bool array."""
        import numpy as np

        which, reasons = self.grouped(pod, claims, states, idx)
        return np.array([not r for r in reasons], dtype=bool)[which]

    def grouped(self, pod: Pod, claims: list[Claim], states: Sequence[Any], idx: Any) -> tuple[Any, list[Any]]:
        """``filter`` on each node of ``idx`` (a numpy array of node indexes), run once per combination of
        the labels it reads (``_reads``; per node where it reads names): per node an index into the list of
        reasons returned with it."""
        import numpy as np

        read, by_name = self._reads(claims)
        if by_name:
            check = self.filter_memo(pod, claims)
            found: dict[tuple[str, ...], int] = {}
            which = np.fromiter(
                (found.setdefault(check(states[i].node), len(found)) for i in idx.tolist()),
                dtype=np.int64,
                count=len(idx),
            )
            return which, list(found)
        gid = self._label_ids(read, states)[idx]
        _, first, inverse = np.unique(gid, return_index=True, return_inverse=True)
        reasons = [self.filter(pod, claims, states[int(idx[j])].node) for j in first.tolist()]
        return inverse.reshape(-1), reasons

    def _label_ids(self, read: tuple[str, ...], states: Sequence[Any]) -> Any:
        """Per node index, an id of its values of the labels ``read`` (kept per tuple of keys, nodes taken
        in as they join)."""
        import numpy as np

        values = self._label_values.setdefault(read, {})
        ids = self._label_id_arrays.get(read)
        seen = 0 if ids is None else len(ids)
        if seen < len(states):
            fresh = [
                values.setdefault(tuple([labels.get(k) for k in read]), len(values))
                for labels in (states[i].node.labels for i in range(seen, len(states)))
            ]
            tail = np.array(fresh, dtype=np.int64)
            ids = self._label_id_arrays[read] = tail if ids is None else np.concatenate([ids, tail])
        return ids

    def _match(self, claim: Claim, node: Node | None, chosen: Mapping[str, Volume] = {}) -> Volume | None:
        """FindMatchingVolume: a volume pre-bound to the claim, else the smallest Available one of its class
        that fits its request and access modes (and, on the scheduler's path, the node)."""
        labels = node_labels(node) if node is not None else None
        mine = self._prebound.get(claim.key)
        if mine is not None and mine.name not in chosen and not mine.deleting and mine.capacity >= claim.storage:
            ok = labels is None or mine.node_affinity is None or node_selector_matches(mine.node_affinity, labels, node.name if node else "")
            return mine if ok else None
        best: Volume | None = None
        for pv in self._available.get(claim.storage_class, ()):
            if pv.name in chosen or pv.deleting or pv.capacity < claim.storage or pv.phase != "Available":
                continue
            if labels is not None and pv.node_affinity is not None and not node_selector_matches(pv.node_affinity, labels, node.name if node else ""):
                continue
            if not set(claim.access_modes) <= set(pv.access_modes):
                continue
            if best is None or pv.capacity < best.capacity:
                best = pv
        return best

    # --- bind -------------------------------------------------------------------------------------------

    def commit(self, pod: Pod, claims: list[Claim], node: Node) -> None:
        """The pod is bound to ``node``: its claims count a user, and those not bound bind there."""
        chosen: dict[str, Volume] = {}
        for c in sorted(claims, key=lambda c: c.storage):
            self.users[c.key] += 1
            if self._bound(c):
                continue
            pv = None if c.selected_node else self._match(c, node, chosen)
            if pv is None:
                pv = self._provision(pod, c, node)
            chosen[pv.name] = pv
            self._bind(c, pv)
        note = [self._provision_notes[c.key] for c in claims if c.key in self._provision_notes]
        if note:
            self.warnings.setdefault(pod.key, []).extend(note)

    def _provision(self, pod: Pod, c: Claim, node: Node) -> Volume:
        cls = self.objects.classes[c.storage_class]
        affinity = None
        if cls.provisioner in ZONAL:
            zone = node.labels.get(ZONE) or node.labels.get(BETA_ZONE)
            if zone:
                affinity = NodeSelector((Term((Requirement(ZONE, "In", (zone,)),)),))
        elif cls.provisioner not in ANYWHERE:
            self.warnings.setdefault(pod.key, []).append(
                f"claim {c.name}: the topology of volumes from provisioner {cls.provisioner} (StorageClass "
                f"{cls.name}) is not known to kgpu; placed as if every node reaches them"
            )
        return self._new_volume(c, affinity)

    def _new_volume(self, c: Claim, affinity: NodeSelector | None) -> Volume:
        name = f"pvc-{c.namespace}-{c.name}"
        pv = Volume(name, c.storage_class, c.storage, c.access_modes, c.key, affinity, {}, "Bound",
                    where=f"provisioned for {c.namespace}/{c.name}")
        self.objects.volumes[name] = pv
        return pv

    def _bind(self, c: Claim, pv: Volume) -> None:
        c.volume_name, c.phase = pv.name, "Bound"
        free = self._available.get(pv.storage_class)
        if free is not None and pv in free:
            free.remove(pv)
        pv.claim_ref, pv.phase = c.key, "Bound"
        self._prebound[c.key] = pv

    # --- the fast path: the volumes' constraint as node affinity -----------------------------------------

    def as_affinity(self, pod: Pod, claims: list[Claim]) -> NodeSelector | bool | None:
        """What the volume plugins ask of a node for ``pod``, as node affinity, when that is exact: None
        (nothing), a NodeSelector, or False (it is not: ReadWriteOncePod in use, volumes with zone labels,
        claims that may bind an existing volume, claims no node can provision)."""
        extra: list[NodeSelector] = []
        for c in claims:
            if RWOP in c.access_modes and self.users[c.key]:
                return False
            if self._bound(c):
                pv = self.objects.volumes[c.volume_name]
                if any(k in pv.labels for k in TOPOLOGY_LABELS):
                    return False
                if pv.node_affinity is not None:
                    extra.append(_normalised(pv.node_affinity))
                continue
            if c.key in self._prebound or self._available.get(c.storage_class):
                return False
            if c.selected_node:
                extra.append(NodeSelector((Term((), (Requirement("metadata.name", "In", (c.selected_node,)),)),)))
                continue
            cls = self.objects.classes.get(c.storage_class)
            if cls is None or cls.provisioner in ("", NO_PROVISIONER):
                return False
            if cls.allowed_topologies is not None:
                extra.append(_normalised(cls.allowed_topologies))
        if not extra:
            return None
        return _merged(NodeSelector((Term(),)), extra)

    def spec_with(self, spec: PodSpecInfo, sel: NodeSelector) -> PodSpecInfo | None:
        """``spec`` with ``sel`` ANDed into its required node affinity (kept per spec and selector, so pods
        of one kind share one scheduler class); None when the spec's own terms all match nothing."""
        key = (id(spec), sel)
        hit = self._specs.get(key)
        if hit is not None and hit[0] is spec:
            return hit[1]
        if spec.affinity is not None:
            own = tuple(t for t in spec.affinity.terms if t.match_expressions or t.match_fields)
            if not own:
                return None
            sel = _merged(NodeSelector(own), [sel])
        out = _replace(spec, affinity=sel)
        self._specs[key] = (spec, out)
        return out

    # --- provisioners -----------------------------------------------------------------------------------

    def for_provisioner(self, pod: Pod) -> Pod:
        """``pod`` with its volumes' topology added to its required node affinity (Karpenter's volume
        topology), for the autoscalers; the pod itself when its volumes add nothing."""
        extra: list[NodeSelector] = []
        for entry in pod.spec.volume_claims:
            claim, _ = self._claim(pod, entry)
            if claim is None:
                continue
            if self._bound(claim):
                pv = self.objects.volumes.get(claim.volume_name)
                if pv is not None and pv.node_affinity is not None:
                    extra.append(_normalised(pv.node_affinity))
            else:
                cls = self.objects.classes.get(claim.storage_class)
                if cls is not None and cls.allowed_topologies is not None:
                    extra.append(_normalised(cls.allowed_topologies))
        if not extra:
            return pod
        base = pod.spec.affinity if pod.spec.affinity is not None else NodeSelector((Term(),))
        from dataclasses import replace as replace_pod

        return replace_pod(pod, spec=_replace(pod.spec, affinity=_merged(base, extra)))


def _merged(base: NodeSelector, extra: list[NodeSelector]) -> NodeSelector:
    """Terms ORed, requirements ANDed: every term of ``base`` with every term of each selector of ``extra``."""
    terms = base.terms
    for sel in extra:
        terms = tuple(Term(a.match_expressions + b.match_expressions, a.match_fields + b.match_fields)
                      for a in terms for b in sel.terms)
    return NodeSelector(terms)


def _normalised(sel: NodeSelector) -> NodeSelector:
    """The EBS CSI driver's zone key read as the well-known zone label (Karpenter's normalised labels)."""
    return NodeSelector(tuple(
        Term(tuple(Requirement(ZONE if r.key == EBS_ZONE else r.key, r.operator, r.values) for r in t.match_expressions),
             t.match_fields)
        for t in sel.terms
    ))


def _single_zone(sel: NodeSelector | None) -> NodeSelector | None:
    """allowedTopologies that allow exactly one zone: the volume's node affinity an Immediate claim gets."""
    if sel is None or len(sel.terms) != 1:
        return None
    zones = [r for r in sel.terms[0].match_expressions if r.key in (ZONE, EBS_ZONE) and len(r.values) == 1]
    return NodeSelector((Term((zones[0],)),)) if zones else None
