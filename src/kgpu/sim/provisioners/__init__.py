"""The autoscalers: what launches nodes for pods kube-scheduler could not place, and what removes them.

- ``karpenter/``: sigs.k8s.io/karpenter v1.8 (``solve``: ``pkg/controllers/provisioning/scheduling``;
  ``disruption``: ``pkg/controllers/disruption``, consolidation;
  ``requirements``: ``pkg/scheduling``; ``overlay``: ``pkg/controllers/nodeoverlay`` and the overlay
  cloud-provider decorator; ``topology``: the scheduler's ``topology.go`` for claims).
- ``cluster_autoscaler.py``: kubernetes/autoscaler's cluster-autoscaler on AWS node groups, scale-up and
  scale-from-zero (the node template from the ASG's ``k8s.io/cluster-autoscaler/node-template/*`` tags).
- ``tke/``: Tencent TKE super nodes (``supernode``) and the pod's GPU spec (``spec``).
- ``scale_down.py``: which empty GPU node is removed, by whom and after how long.
- ``pools.py``: the vocabulary every provisioner shares; ``dra_pools.py``: pools whose GPUs are DRA devices;
  ``provision.py``: chooses the provisioners for a profile and runs them (nothing imports it back).
"""
