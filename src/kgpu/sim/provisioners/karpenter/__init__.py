"""Karpenter (sigs.k8s.io/karpenter v1.8, the version ``make conformance`` pins).

| module | upstream |
|---|---|
| ``solve`` | ``pkg/controllers/provisioning/scheduling`` (``scheduler.go``, ``existingnode.go``, ``queue.go``, ``preferences.go``) |
| ``pool_model`` | the NodePool and its instance types in a Solve (``scheduler.go`` ``NewScheduler``, ``pkg/cloudprovider`` offerings) |
| ``nodeclaim`` | ``pkg/controllers/provisioning/scheduling/nodeclaim.go`` |
| ``disruption`` | ``pkg/controllers/disruption`` (emptiness, multi- and single-node consolidation) |
| ``requirements`` | ``pkg/scheduling`` (``requirements.go``, ``requirement.go``) |
| ``topology`` | ``pkg/controllers/provisioning/scheduling/topology.go``, ``topologygroup.go`` |
| ``overlay`` | ``pkg/controllers/nodeoverlay``, ``pkg/cloudprovider/overlay`` |
"""
