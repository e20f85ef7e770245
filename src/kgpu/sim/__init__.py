"""The simulator, laid out as the components it models.

- ``scheduler/``: kube-scheduler (k8s.io/kubernetes ``pkg/scheduler``). ``scheduler/scheduler.py`` is the
  placement loop and its cache (``scheduler.go``, ``schedule_one.go``); ``scheduler/plugins/`` holds the
  plugins whose state outgrows a pure predicate, one module per plugin family as upstream keeps
  ``framework/plugins/<plugin>/``: scoring (TaintToleration, NodeAffinity), topology (PodTopologySpread,
  InterPodAffinity), volumebinding (VolumeBinding, VolumeRestrictions, VolumeZone), dynamicresources and
  its cel (DynamicResources), defaultpreemption (DefaultPreemption). The stateless filters are pure
  functions in ``kgpu.model.predicates``.
- ``simulate.py``: one simulation, the queue (PrioritySort), PostFilter, and the hand-off of what fits
  nowhere to the provisioners; ``sharing.py`` the device plugin's shared GPUs on nodes, ``unmodelled.py``
  the warnings for what is not modelled.
- ``provisioners/``: the autoscalers. ``karpenter/`` mirrors sigs.k8s.io/karpenter
  (``solve``: ``pkg/controllers/provisioning/scheduling``; ``disruption``: ``pkg/controllers/disruption``,
  consolidation; ``requirements``: ``pkg/scheduling``;
  ``overlay``: NodeOverlays; ``topology``: its topology spread for claims); ``cluster_autoscaler.py``
  mirrors kubernetes/autoscaler's cluster-autoscaler (scale-up, scale-from-zero templates from ASG tags);
  ``tke/`` the Tencent TKE super nodes; ``scale_down.py`` who removes an empty GPU node and when;
  ``pools.py`` the vocabulary they share and ``provision.py`` the dispatcher that chooses them.
- ``plan.py`` and ``cost.py`` on top: profile + workloads -> placements, nodes and their price.

Imports run downward only: plan, provisioners, simulate, scheduler (``pyproject.toml``'s import-linter
contracts).
"""
