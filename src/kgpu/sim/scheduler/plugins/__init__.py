"""kube-scheduler's framework plugins (``pkg/scheduler/framework/plugins/<plugin>/``), one module per family.

| module | upstream plugin folders |
|---|---|
| ``scoring`` | ``tainttoleration``, ``nodeaffinity`` (normalised scores), ``helper/normalize_score.go`` |
| ``topology``, ``topology_counters``, ``topology_filter`` | ``podtopologyspread``, ``interpodaffinity`` |
| ``volumebinding`` | ``volumebinding``, ``volumerestrictions``, ``volumezone`` |
| ``dynamicresources``, ``dra_place`` | ``dynamicresources`` |
| ``dra_allocator``, ``cel`` | k8s.io/dynamic-resource-allocation ``structured``, ``cel`` |
| ``cel_parse``, ``cel_library``, ``cel_types``, ``cel_costs``, ``cel_estimate`` | cel-go's parser and ``checker/cost.go``; k8s.io/apiserver ``pkg/cel/library`` |
| ``defaultpreemption`` | ``defaultpreemption``; ``framework/preemption`` |

NodeResourcesFit, NodeUnschedulable, NodeName, NodePorts, TaintToleration's and NodeAffinity's filters are
pure predicates in ``kgpu.model.predicates``; their scores live in ``classes.py`` (``_score``) and
``scoring``.
"""
