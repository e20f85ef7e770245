"""kube-scheduler's framework plugins (``pkg/scheduler/framework/plugins/<plugin>/``), one module per family.

| module | upstream plugin folders |
|---|---|
| ``scoring`` | ``tainttoleration``, ``nodeaffinity`` (normalised scores), ``helper/normalize_score.go`` |
| ``topology`` | ``podtopologyspread``, ``interpodaffinity`` |
| ``volumebinding`` | ``volumebinding``, ``volumerestrictions``, ``volumezone`` |
| ``dynamicresources``, ``cel`` | ``dynamicresources``; k8s.io/dynamic-resource-allocation ``structured``, ``cel`` |
| ``defaultpreemption`` | ``defaultpreemption``; ``framework/preemption`` |

NodeResourcesFit, NodeUnschedulable, NodeName, NodePorts, TaintToleration's and NodeAffinity's filters are
pure predicates in ``kgpu.model.predicates``; their scores live in ``scheduler.py`` (``_score``) and
``scoring``.
"""
