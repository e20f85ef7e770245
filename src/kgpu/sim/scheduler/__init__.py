"""kube-scheduler (k8s.io/kubernetes v1.34 ``pkg/scheduler``) over a snapshot.

``scheduler.py`` is the placement loop and its cache (compare with ``pkg/scheduler/scheduler.go``,
``schedule_one.go`` and ``internal/cache``), ``classes.py`` the node state, the pod classes and NodeResourcesFit
with the default scores it ranks by, ``arrays.py`` the loop's numpy path for many classes; ``plugins/`` the
framework plugins that keep state across pods.
Nothing here knows about autoscalers: the provisioners call into this package, never the reverse.
"""
