"""TKE super nodes: every GPU pod buys its own spec and runs on its own virtual node.

A pod goes to a super-node pool when it tolerates the pool's taints, its selectors match the pool's labels
(``type: virtual-kubelet``), and it names GPU models with ``eks.tke.cloud.tencent.com/gpu-type``. With the
pool's ``autoSchedule`` (TKE's AUTO_SCALE_EKS, on by default) the super node's own taint
``eks.tke.cloud.tencent.com/eklet`` does not keep out a pod that fits no other node: TKE's control
components place such pods on super nodes themselves. Other taints declared on the pool still apply. The spec
comes from ``kgpu.sim.provisioners.tke.spec.match_pod_spec`` (explicit annotations, or requests/limits rounded up); a pod whose
spec cannot be matched stays Pending with TKE's error wording. The virtual node is sized by the spec
(cpu cores, memory GiB, GPUs; one pod), labelled like a super node, and priced by the pool's ``prices``
(cards x GPU price + cores x core price + GiB x GiB price; kgpu packages no TKE prices, so without them the
node is unpriced). A vGPU slice spec's note says what it saves against the same spec on a whole card.
Super nodes run no DaemonSets.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kgpu.catalog.tke import TkeMatchError, TkePrices, TkeSpec, packaged_prices, whole_card
from kgpu.model.objects import CPU, GPU, MEMORY, Node, Pod
from kgpu.model.objects import Taint as NodeTaint
from kgpu.model.predicates import filter_reasons
from kgpu.model.profile import TKE_SUPERNODE_TAINT, Pool, PoolKind, Profile
from kgpu.sim.provisioners.pools import Context, NewNode, node_taints, pool_zones
from kgpu.sim.provisioners.tke.spec import GPU_TYPE, match_pod_spec

GIB = 1024**3
EPHEMERAL_BYTES = 20 * GIB  # a super-node pod's default system disk
VIRTUAL_LABELS = {"type": "virtual-kubelet", "node.kubernetes.io/instance-type": "eklet"}


class SuperNodes:
    """The profile's TKE super-node pools."""

    name = "tke-supernode"

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.pools = [p for p in profile.pools if p.kind == PoolKind.TKE_SUPERNODE]

    def provision(self, pending: Sequence[Pod], ctx: Context) -> dict[str, str]:
        notes: dict[str, str] = {}
        for pod in pending:
            note = self._one(pod, ctx)
            if note:
                notes[pod.key] = note
        return notes

    def _one(self, pod: Pod, ctx: Context) -> str:
        errors = []
        for pool in self.pools:
            zones = pool_zones(self.profile, pool)
            zone = zones[0] if zones else ""
            labels = {
                **VIRTUAL_LABELS,
                **pool.labels,
                "topology.kubernetes.io/region": self.profile.cluster.region,
                "topology.kubernetes.io/zone": zone,
            }
            probe = Node(
                "probe",
                labels,
                {
                    CPU: 1 << 40,
                    MEMORY: 1 << 60,
                    GPU: 1 << 20,
                    "pods": 1,
                    "ephemeral-storage": EPHEMERAL_BYTES,
                },
                _binding_taints(pool),
            )
            static = filter_reasons(pod.spec, probe, {}, 0)
            if static:
                errors.append(f'pool "{pool.name}": {static[0]}')
                continue
            if GPU_TYPE not in pod.annotations and pod.spec.gpus:
                errors.append(
                    f'pool "{pool.name}": a GPU pod on a super node must name its GPU model with {GPU_TYPE}'
                )
                continue
            try:
                match = match_pod_spec(pod.annotations, dict(pod.spec.requests), dict(pod.limits))
            except TkeMatchError as exc:
                errors.append(f'pool "{pool.name}": {exc.message}')
                continue
            memory = int(match.memory.removesuffix("Gi")) * GIB
            alloc = {
                CPU: match.cpu * 1000,
                MEMORY: memory,
                GPU: match.gpu_count,
                "pods": 1,
                "ephemeral-storage": EPHEMERAL_BYTES,
            }
            name = ctx.node_name(f"eklet-{pool.name}")
            spec_name = f"{match.gpu_type} {match.gpu_count}x {match.cpu}C {match.memory}"
            spec = TkeSpec(match.gpu_type, match.gpu_count, match.cpu, memory // GIB)
            prices = pool_prices(pool)
            price = prices.spec_price(spec)
            saving = vgpu_saving(spec, prices)
            node = Node(name, {**labels, "kubernetes.io/hostname": name}, alloc, node_taints(pool))
            new = NewNode(
                name,
                pool.name,
                spec_name,
                "on-demand",
                zone,
                price,
                kind="tke-supernode",
                on_demand_price=price,
                gpus=match.gpu_count,
                note=f"TKE spec ({match.mode} mode" + (f"; {match.note})" if match.note else ")")
                + (f"; {saving[2]}" if saving else ""),
            )
            st = ctx.launch(node, new)
            check = Node(name, node.labels, alloc, _binding_taints(pool))
            reasons = filter_reasons(pod.spec, check, st.requested, st.pod_count, st.ports)
            if reasons:
                errors.append(
                    f'pool "{pool.name}": spec {spec_name} does not hold the pod: {", ".join(reasons)}'
                )
                continue
            ctx.scheduler.bind(pod, st)
            ctx.placed(pod, st)
            return ""
        return "tke-supernode: " + "; ".join(errors) if errors else ""


def _binding_taints(pool: Pool) -> tuple[NodeTaint, ...]:
    """The pool's taints a pending pod must tolerate: all of them, less TKE's own super-node taint when TKE
    places pods that fit nowhere else (autoSchedule)."""
    taints = node_taints(pool)
    if pool.auto_schedule:
        return tuple(t for t in taints if t.key != TKE_SUPERNODE_TAINT)
    return taints


def pool_prices(pool: Pool) -> TkePrices:
    """The pool's own prices, else the packaged snapshot (which has no figures)."""
    if pool.prices is None:
        return packaged_prices()
    p = pool.prices
    return TkePrices(
        date=p.date,
        source=p.source,
        cpu_core_hour=p.cpu_core_hour,
        memory_gib_hour=p.memory_gib_hour,
        gpu_hour=tuple(p.gpu_hour.items()),
        currency=p.currency,
    )


def vgpu_saving(spec: TkeSpec, prices: TkePrices) -> tuple[float, float, str] | None:
    """(slice price, whole-card price, sentence) for a vGPU slice spec when both are priced."""
    whole = whole_card(spec)
    if whole is None:
        return None
    mine, full = prices.spec_price(spec), prices.spec_price(whole)
    if mine is None or full is None or full <= 0:
        return None
    saved = full - mine
    text = (
        f"{spec.gpu_type} saves ${saved:,.4f}/h ({saved / full:.0%}) against {whole.gpu_type} "
        f"{whole.gpus}x {whole.cpu}C {whole.memory_gib}Gi at ${full:,.4f}/h"
    )
    return mine, full, text


_SPEC_NAME = re.compile(r"^(\S+) ([0-9]+)x ([0-9]+)C ([0-9]+)Gi$")


def spec_of(instance_type: str) -> TkeSpec | None:
    """The spec behind a super node's instance-type text (``1/4*T4 1x 4C 16Gi``)."""
    m = _SPEC_NAME.match(instance_type)
    if m is None:
        return None
    return TkeSpec(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))

