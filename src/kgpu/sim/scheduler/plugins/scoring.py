"""The default profile's score plugins that kube-scheduler normalises over the feasible nodes, and the weights.

kube-scheduler runs every Score plugin on each feasible node, lets each plugin normalise its scores to
0..``MAX_NODE_SCORE`` over those nodes (NormalizeScore), multiplies by the plugin's weight in the profile and
adds the results. NodeResourcesFit (LeastAllocated) and NodeResourcesBalancedAllocation already score in
0..100 and do not normalise; the scheduler computes them in ``_score``. The plugins here do normalise, so a
node's score depends on which other nodes are feasible at that moment:

- TaintToleration: the number of the node's ``PreferNoSchedule`` taints the pod does not tolerate,
  normalised with ``DefaultNormalizeScore`` reversed (fewest untolerated taints scores 100);
- NodeAffinity: the sum of the weights of the pod's ``preferredDuringSchedulingIgnoredDuringExecution``
  terms the node matches, normalised with ``DefaultNormalizeScore``.

Both raw scores depend only on the pod spec and the node object (*static* plugins), so the scheduler keeps
them per class and node and only re-normalises. A plugin whose raw score depends on the pods already placed
(PodTopologySpread, InterPodAffinity) is a ``NormalizedPlugin`` with ``static = False``.

Sources (behaviour, not code), kubernetes v1.34: pkg/scheduler/apis/config/v1/default_plugins.go (weights),
pkg/scheduler/framework/plugins/helper/normalize_score.go, plugins/tainttoleration/taint_toleration.go,
plugins/nodeaffinity/node_affinity.go and component-helpers/scheduling/corev1/nodeaffinity (Score of
PreferredSchedulingTerms: terms with weight 0 or an empty preference never count).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kgpu.model.objects import Node, PodSpecInfo, PreferredTerm, Taint, Toleration
from kgpu.model.predicates import term_matches, tolerated

MAX_NODE_SCORE = 100

# The default profile's Score plugins and their weights (default_plugins.go, MultiPoint). ImageLocality is not
# modelled: kgpu knows no node images, so it scores 0 everywhere.
WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}


def default_normalize(scores: Sequence[int], reverse: bool) -> list[int]:
    """DefaultNormalizeScore: scale [0, max] to [0, 100] with int64 division; reversed, 100 minus that.
    All zero: 0 everywhere, or 100 everywhere when reversed. Scores are non-negative."""
    top = max(scores, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0] * len(scores)
    if reverse:
        return [MAX_NODE_SCORE - MAX_NODE_SCORE * s // top for s in scores]
    return [MAX_NODE_SCORE * s // top for s in scores]


def default_normalize_array(raw: Any, fit: Any, reverse: bool) -> Any:
    """``default_normalize`` in numpy over the nodes where ``fit`` holds (other entries are meaningless)."""
    import numpy as np

    top = int(raw[fit].max()) if fit.any() else 0
    if top == 0:
        return np.full(len(raw), MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    scaled = MAX_NODE_SCORE * raw // top
    return MAX_NODE_SCORE - scaled if reverse else scaled


def untolerated_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """TaintToleration's Score: the PreferNoSchedule taints no toleration tolerates. (Its PreScore keeps the
    tolerations with effect PreferNoSchedule or none; ``tolerates`` already rejects any other effect.)"""
    return sum(1 for t in taints if t.effect == "PreferNoSchedule" and not tolerated(tolerations, t))


def preferred_weight(preferred: Sequence[PreferredTerm], labels: Any, node_name: str) -> int:
    """NodeAffinity's Score: the sum of the weights of the preferred terms the node matches."""
    return sum(p.weight for p in preferred if p.weight and term_matches(p.term, labels, node_name))


@dataclass(frozen=True, slots=True)
class NormalizedPlugin:
    """A Score plugin whose scores are normalised over the feasible nodes.

    ``raw`` gives the plugin's score before normalisation; ``normalize`` maps the raw scores of the feasible
    nodes to 0..100 (list in, list out, same order). ``static`` says the raw score reads only the pod spec and
    the node object, so it can be kept per class and node for the whole simulation.
    """

    name: str
    weight: int
    static: bool
    raw: Callable[[PodSpecInfo, Node], int]
    normalize: Callable[[Sequence[int]], list[int]]
    normalize_array: Callable[[Any, Any], Any]


TAINT_TOLERATION = NormalizedPlugin(
    "TaintToleration",
    WEIGHTS["TaintToleration"],
    True,
    lambda spec, node: untolerated_prefer_no_schedule(node.taints, spec.tolerations),
    lambda scores: default_normalize(scores, True),
    lambda raw, fit: default_normalize_array(raw, fit, True),
)
NODE_AFFINITY = NormalizedPlugin(
    "NodeAffinity",
    WEIGHTS["NodeAffinity"],
    True,
    lambda spec, node: preferred_weight(spec.preferred, node.labels, node.name),
    lambda scores: default_normalize(scores, False),
    lambda raw, fit: default_normalize_array(raw, fit, False),
)
# In the order kgpu keeps raw scores per class: index 0 is TaintToleration, 1 NodeAffinity.
STATIC_PLUGINS: tuple[NormalizedPlugin, ...] = (TAINT_TOLERATION, NODE_AFFINITY)


def normalized_total(plugins: Sequence[NormalizedPlugin], raws: Sequence[Sequence[int]]) -> list[int]:
    """Sum over ``plugins`` of weight x normalised score; ``raws[i]`` are plugin i's raw scores of the
    feasible nodes, all in the same node order."""
    n = len(raws[0]) if raws else 0
    total = [0] * n
    for plugin, raw in zip(plugins, raws, strict=True):
        w = plugin.weight
        for i, s in enumerate(plugin.normalize(raw)):
            total[i] += w * s
    return total
