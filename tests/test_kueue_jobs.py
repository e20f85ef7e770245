"""Jobs -> the Workloads Kueue v0.15.0's integrations create (kgpu.model.kueue_jobs, kueue_pods, kueue_rolehash).

The expected Workloads below were produced by Kueue's own code, not written by hand: the job integrations'
``PodSets`` through ``jobframework.ConstructWorkload`` and ``PrepareWorkloadPriority`` (pods: ``pod.Load`` and
``ConstructComposableWorkload``), and ``util/pod.GenerateRoleHash`` for role hashes, built from
sigs.k8s.io/kueue v0.15.0 and run over a controller-runtime fake client holding the same objects. That fake
client applies no CRD defaults, so ``spec.active`` (the CRD's default, true) and ``creationTimestamp`` (the API
server's) are compared separately.
"""

from __future__ import annotations

import copy
import hashlib
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from kgpu.errors import InputError
from kgpu.model.kueue_jobframework import stand_in_uid
from kgpu.model.kueue_jobs import read_jobs, workload_name, workloads_for
from kgpu.model.kueue_rolehash import quantity_string, role_hash

ALL = {
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "pod",
    "deployment",
    "statefulset",
}

CLUSTER = [
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "prod"},
        "value": 500,
    },
    {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pytorch-training",
            "namespace": "team-a",
            "uid": "4f7c0a52-2a3e-4c51-9d0e-1b6a3f7d2c11",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "prod"},
            "annotations": {
                "kueue.x-k8s.io/job-min-parallelism": "2",
                "provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600",
            },
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "parallelism": 4,
            "completions": 8,
            "template": {
                "metadata": {
                    "labels": {
                        "batch.kubernetes.io/job-name": "pytorch-training",
                        "job-name": "pytorch-training",
                        "controller-uid": "x",
                        "batch.kubernetes.io/controller-uid": "x",
                        "app": "a",
                    }
                },
                "spec": {
                    "priorityClassName": "high",
                    "containers": [
                        {
                            "name": "c",
                            "image": "i",
                            "env": [
                                {"name": "A", "value": "1"},
                                {"name": "B", "value": "2"},
                                {"name": "A", "value": "3"},
                            ],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                    "restartPolicy": "Never",
                },
            },
        },
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch-low"},
        "value": 100,
        "globalDefault": True,
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "gpu-high"},
        "value": 10000,
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "research"},
        "value": 50,
    },
    {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "llm-pretrain",
            "namespace": "team-b",
            "uid": "9b1f2c3d-0000-4000-8000-000000000001",
            "labels": {"kueue.x-k8s.io/queue-name": "team-b", "kueue.x-k8s.io/max-exec-time-seconds": "7200"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "Driver",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {"name": "d", "image": "i", "resources": {"requests": {"cpu": "2"}}}
                                    ]
                                }
                            },
                        }
                    },
                },
                {
                    "name": "workers",
                    "replicas": 3,
                    "template": {
                        "spec": {
                            "parallelism": 4,
                            "completions": 2,
                            "template": {
                                "metadata": {
                                    "annotations": {
                                        "kueue.x-k8s.io/podset-preferred-topology": "cloud.google.com/gce-topology-block"
                                    }
                                },
                                "spec": {
                                    "priorityClassName": "gpu-high",
                                    "containers": [
                                        {
                                            "name": "w",
                                            "image": "i",
                                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                                        }
                                    ],
                                },
                            },
                        }
                    },
                },
            ]
        },
    },
    {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "raycluster-gpu",
            "namespace": "team-a",
            "uid": "9b1f2c3d-0000-4000-8000-000000000002",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "research"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-head",
                                "image": "rayproject/ray:2.46.0",
                                "resources": {"requests": {"cpu": "1", "memory": "4Gi"}},
                            }
                        ]
                    }
                },
            },
            "workerGroupSpecs": [
                {
                    "groupName": "GPU-Group",
                    "replicas": 2,
                    "numOfHosts": 2,
                    "minReplicas": 0,
                    "maxReplicas": 4,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                            ]
                        }
                    },
                },
                {
                    "groupName": "cpu",
                    "replicas": 0,
                    "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                },
            ],
        },
    },
    {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "plain",
            "namespace": "team-a",
            "uid": "9b1f2c3d-0000-4000-8000-000000000003",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "parallelism": 2,
            "template": {
                "metadata": {"labels": {"batch.kubernetes.io/job-name": "plain", "job-name": "plain"}},
                "spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"},
            },
        },
    },
    {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "rj-http",
            "namespace": "team-a",
            "uid": "9b1f2c3d-0000-4000-8000-000000000004",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "submissionMode": "HTTPMode",
            "shutdownAfterJobFinishes": True,
            "submitterPodTemplate": {"spec": {"containers": [{"name": "s", "image": "x"}]}},
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "h"}]}}},
                "workerGroupSpecs": [],
            },
        },
    },
    {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "rj-sub",
            "namespace": "team-a",
            "uid": "9b1f2c3d-0000-4000-8000-000000000005",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "submitterPodTemplate": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {
                    "priorityClassName": "gpu-high",
                    "containers": [{"name": "s", "image": "x", "resources": {"requests": {"cpu": "250m"}}}],
                },
            },
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "h"}]}}}
            },
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "g-0",
            "namespace": "ns",
            "uid": "u0",
            "labels": {
                "kueue.x-k8s.io/managed": "true",
                "kueue.x-k8s.io/queue-name": "q",
                "kueue.x-k8s.io/pod-group-name": "grp",
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "g-1",
            "namespace": "ns",
            "uid": "u1",
            "labels": {
                "kueue.x-k8s.io/managed": "true",
                "kueue.x-k8s.io/queue-name": "q",
                "kueue.x-k8s.io/pod-group-name": "grp",
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "g-2",
            "namespace": "ns",
            "uid": "u2",
            "labels": {
                "kueue.x-k8s.io/managed": "true",
                "kueue.x-k8s.io/queue-name": "q",
                "kueue.x-k8s.io/pod-group-name": "grp",
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "f-0",
            "namespace": "ns",
            "uid": "u5",
            "labels": {
                "kueue.x-k8s.io/managed": "true",
                "kueue.x-k8s.io/queue-name": "q",
                "kueue.x-k8s.io/pod-group-name": "fast",
            },
            "annotations": {
                "kueue.x-k8s.io/pod-group-total-count": "4",
                "kueue.x-k8s.io/pod-group-fast-admission": "true",
                "kueue.x-k8s.io/role-hash": "abcd1234",
            },
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "solo",
            "namespace": "ns",
            "uid": "u3",
            "labels": {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "q"},
            "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60", "other": "x"},
            "creationTimestamp": "2026-11-28T09:00:00Z",
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "priorityClassName": "gpu-high",
            "containers": [
                {"name": "c", "image": "i", "env": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}]}
            ],
        },
    },
]

# What Kueue v0.15.0 builds for CLUSTER: jobframework.ConstructWorkload + PrepareWorkloadPriority
# (pods: pod.Load + ConstructComposableWorkload) run with the integrations' own Go code over a fake client.
ORACLE = {
    "fast": {
        "metadata": {
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "name": "fast",
            "namespace": "ns",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "f-0", "uid": "u5"}],
        },
        "spec": {
            "podSets": [
                {
                    "count": 4,
                    "name": "abcd1234",
                    "template": {
                        "metadata": {},
                        "spec": {
                            "containers": [
                                {
                                    "image": "i",
                                    "name": "c",
                                    "resources": {
                                        "limits": {"nvidia.com/gpu": "1"},
                                        "requests": {"nvidia.com/gpu": "1"},
                                    },
                                }
                            ],
                            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                        },
                    },
                    "topologyRequest": {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"},
                }
            ],
            "priority": 100,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch-low"},
            "queueName": "q",
        },
    },
    "grp": {
        "metadata": {
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "name": "grp",
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "g-0", "uid": "u0"},
                {"apiVersion": "v1", "kind": "Pod", "name": "g-1", "uid": "u1"},
                {"apiVersion": "v1", "kind": "Pod", "name": "g-2", "uid": "u2"},
            ],
        },
        "spec": {
            "podSets": [
                {
                    "count": 1,
                    "name": "21a4619c",
                    "template": {
                        "metadata": {},
                        "spec": {
                            "containers": [
                                {"image": "i", "name": "c", "resources": {"requests": {"cpu": "2"}}}
                            ],
                            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                        },
                    },
                    "topologyRequest": {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"},
                },
                {
                    "count": 2,
                    "name": "dc85db45",
                    "template": {
                        "metadata": {},
                        "spec": {
                            "containers": [
                                {"image": "i", "name": "c", "resources": {"requests": {"cpu": "1"}}}
                            ],
                            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                        },
                    },
                    "topologyRequest": {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"},
                },
            ],
            "priority": 100,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch-low"},
            "queueName": "q",
        },
    },
    "job-plain-1fe76": {
        "metadata": {
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "labels": {"kueue.x-k8s.io/job-uid": "9b1f2c3d-0000-4000-8000-000000000003"},
            "name": "job-plain-1fe76",
            "namespace": "team-a",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Job",
                    "name": "plain",
                    "uid": "9b1f2c3d-0000-4000-8000-000000000003",
                }
            ],
        },
        "spec": {
            "podSets": [
                {
                    "count": 2,
                    "name": "main",
                    "template": {
                        "metadata": {"labels": {"batch.kubernetes.io/job-name": "plain"}},
                        "spec": {
                            "containers": [{"image": "i", "name": "c", "resources": {}}],
                            "restartPolicy": "Never",
                        },
                    },
                    "topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"},
                }
            ],
            "priority": 100,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch-low"},
            "queueName": "team-a",
        },
    },
    "job-pytorch-training-7e571": {
        "metadata": {
            "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600"},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "labels": {"kueue.x-k8s.io/job-uid": "4f7c0a52-2a3e-4c51-9d0e-1b6a3f7d2c11"},
            "name": "job-pytorch-training-7e571",
            "namespace": "team-a",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Job",
                    "name": "pytorch-training",
                    "uid": "4f7c0a52-2a3e-4c51-9d0e-1b6a3f7d2c11",
                }
            ],
        },
        "spec": {
            "podSets": [
                {
                    "count": 4,
                    "minCount": 2,
                    "name": "main",
                    "template": {
                        "metadata": {
                            "labels": {"app": "a", "batch.kubernetes.io/job-name": "pytorch-training"}
                        },
                        "spec": {
                            "containers": [
                                {
                                    "env": [{"name": "A", "value": "3"}, {"name": "B", "value": "2"}],
                                    "image": "i",
                                    "name": "c",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                }
                            ],
                            "priorityClassName": "high",
                            "restartPolicy": "Never",
                        },
                    },
                    "topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"},
                }
            ],
            "priority": 500,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "prod"},
            "queueName": "team-a",
        },
    },
    "jobset-llm-pretrain-dc99f": {
        "metadata": {
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "labels": {"kueue.x-k8s.io/job-uid": "9b1f2c3d-0000-4000-8000-000000000001"},
            "name": "jobset-llm-pretrain-dc99f",
            "namespace": "team-b",
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "JobSet",
                    "name": "llm-pretrain",
                    "uid": "9b1f2c3d-0000-4000-8000-000000000001",
                }
            ],
        },
        "spec": {
            "maximumExecutionTimeSeconds": 7200,
            "podSets": [
                {
                    "count": 1,
                    "name": "driver",
                    "template": {
                        "metadata": {},
                        "spec": {
                            "containers": [
                                {"image": "i", "name": "d", "resources": {"requests": {"cpu": "2"}}}
                            ]
                        },
                    },
                    "topologyRequest": {
                        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
                        "subGroupCount": 1,
                        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
                    },
                },
                {
                    "count": 6,
                    "name": "workers",
                    "template": {
                        "metadata": {
                            "annotations": {
                                "kueue.x-k8s.io/podset-preferred-topology": "cloud.google.com/gce-topology-block"
                            }
                        },
                        "spec": {
                            "containers": [
                                {"image": "i", "name": "w", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                            ],
                            "priorityClassName": "gpu-high",
                        },
                    },
                    "topologyRequest": {
                        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
                        "preferred": "cloud.google.com/gce-topology-block",
                        "subGroupCount": 3,
                        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
                    },
                },
            ],
            "priority": 10000,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "gpu-high"},
            "queueName": "team-b",
        },
    },
    "pod-solo-a3395": {
        "metadata": {
            "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60"},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "labels": {"kueue.x-k8s.io/job-uid": "u3"},
            "name": "pod-solo-a3395",
            "namespace": "ns",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Pod",
                    "name": "solo",
                    "uid": "u3",
                }
            ],
        },
        "spec": {
            "podSets": [
                {
                    "count": 1,
                    "name": "main",
                    "template": {
                        "metadata": {},
                        "spec": {
                            "containers": [
                                {
                                    "env": [{"name": "X", "value": "2"}],
                                    "image": "i",
                                    "name": "c",
                                    "resources": {},
                                }
                            ],
                            "priorityClassName": "gpu-high",
                            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                        },
                    },
                    "topologyRequest": {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"},
                }
            ],
            "priority": 10000,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "gpu-high"},
            "queueName": "q",
        },
    },
    "raycluster-raycluster-gpu-b1440": {
        "metadata": {
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "labels": {"kueue.x-k8s.io/job-uid": "9b1f2c3d-0000-4000-8000-000000000002"},
            "name": "raycluster-raycluster-gpu-b1440",
            "namespace": "team-a",
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "RayCluster",
                    "name": "raycluster-gpu",
                    "uid": "9b1f2c3d-0000-4000-8000-000000000002",
                }
            ],
        },
        "spec": {
            "podSets": [
                {
                    "count": 1,
                    "name": "head",
                    "template": {
                        "metadata": {},
                        "spec": {
                            "containers": [
                                {
                                    "image": "rayproject/ray:2.46.0",
                                    "name": "ray-head",
                                    "resources": {"requests": {"cpu": "1", "memory": "4Gi"}},
                                }
                            ]
                        },
                    },
                },
                {
                    "count": 4,
                    "name": "gpu-group",
                    "template": {
                        "metadata": {},
                        "spec": {
                            "containers": [
                                {"image": "x", "name": "w", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                            ]
                        },
                    },
                },
                {
                    "count": 0,
                    "name": "cpu",
                    "template": {
                        "metadata": {},
                        "spec": {"containers": [{"image": "x", "name": "c", "resources": {}}]},
                    },
                },
            ],
            "priority": 50,
            "priorityClassRef": {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "research",
            },
            "queueName": "team-a",
        },
    },
    "rayjob-rj-http-45960": {
        "metadata": {
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "labels": {"kueue.x-k8s.io/job-uid": "9b1f2c3d-0000-4000-8000-000000000004"},
            "name": "rayjob-rj-http-45960",
            "namespace": "team-a",
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "RayJob",
                    "name": "rj-http",
                    "uid": "9b1f2c3d-0000-4000-8000-000000000004",
                }
            ],
        },
        "spec": {
            "podSets": [
                {
                    "count": 1,
                    "name": "head",
                    "template": {
                        "metadata": {},
                        "spec": {"containers": [{"image": "h", "name": "h", "resources": {}}]},
                    },
                }
            ],
            "priority": 100,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch-low"},
            "queueName": "team-a",
        },
    },
    "rayjob-rj-sub-0e88c": {
        "metadata": {
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "labels": {"kueue.x-k8s.io/job-uid": "9b1f2c3d-0000-4000-8000-000000000005"},
            "name": "rayjob-rj-sub-0e88c",
            "namespace": "team-a",
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "RayJob",
                    "name": "rj-sub",
                    "uid": "9b1f2c3d-0000-4000-8000-000000000005",
                }
            ],
        },
        "spec": {
            "podSets": [
                {
                    "count": 1,
                    "name": "head",
                    "template": {
                        "metadata": {},
                        "spec": {"containers": [{"image": "h", "name": "h", "resources": {}}]},
                    },
                },
                {
                    "count": 1,
                    "name": "submitter",
                    "template": {
                        "metadata": {"labels": {"a": "b"}},
                        "spec": {
                            "containers": [
                                {"image": "x", "name": "s", "resources": {"requests": {"cpu": "250m"}}}
                            ],
                            "priorityClassName": "gpu-high",
                        },
                    },
                },
            ],
            "priority": 10000,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "gpu-high"},
            "queueName": "team-a",
        },
    },
}


def _norm(wl: dict[str, Any]) -> dict[str, Any]:
    """A Workload without what the fake client leaves out (CRD defaults, creationTimestamp)."""
    wl = copy.deepcopy(wl)
    for key in ("apiVersion", "kind", "status"):
        wl.pop(key, None)
    wl["spec"].pop("active", None)
    wl["metadata"].pop("creationTimestamp", None)
    return wl


def _by_name(workloads: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {w["metadata"]["name"]: w for w in workloads}


def test_every_integration_builds_the_workload_kueue_builds() -> None:
    """Job (minCount, cleaned labels, env sanitised, provreq annotations), JobSet (replicas x parallelism, topology
    sub-groups), RayCluster (numOfHosts, lowercased names, replicas 0), RayJob (HTTPMode: no submitter; K8sJobMode:
    the given submitter template), a pod group by roles, a fast-admission group, a plain pod: equal to Kueue's."""
    result = read_jobs(CLUSTER, source="cluster.json", integrations=ALL)
    assert result.skipped == []
    got = _by_name(result.workloads)
    assert sorted(got) == sorted(ORACLE)
    for name, expected in ORACLE.items():
        assert _norm(got[name]) == expected, name
        assert got[name]["spec"]["active"] is True
        assert got[name]["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert got[name]["metadata"]["creationTimestamp"] == "2026-11-28T09:00:00Z"


def test_input_objects_are_not_changed() -> None:
    before = copy.deepcopy(CLUSTER)
    read_jobs(CLUSTER, source="cluster.json", integrations=ALL)
    assert before == CLUSTER


def test_workload_name_is_kind_name_and_sha1_of_kind_group_name_uid() -> None:
    """GetWorkloadNameForOwnerWithGVK: sha1("Kind\\ngroup\\nname\\nuid"), 5 hex digits; the prefix cut at 247."""
    uid = "4f7c0a52-2a3e-4c51-9d0e-1b6a3f7d2c11"
    assert workload_name("pytorch-training", uid, "Job", "batch") == "job-pytorch-training-7e571"
    digest = hashlib.sha1(f"Job\nbatch\npytorch-training\n{uid}".encode()).hexdigest()
    assert digest[:5] == "7e571"
    long = "a" * 250
    name = workload_name(long, "0b9e5a52-1c1e-4b0c-9a55-0d2f0a6f7e01", "RayCluster", "ray.io")
    assert len(name) == 253 and name == f"raycluster-{'a' * 236}-a1639"  # value from Kueue's own function
    # the StatefulSet's group is named before the object has a uid
    sts = hashlib.sha1(b"StatefulSet\napps\ndb\n").hexdigest()[:5]
    assert workload_name("db", "", "StatefulSet", "apps") == f"statefulset-db-{sts}"


def test_a_new_job_gets_the_api_servers_labels_the_default_queue_and_a_stand_in_uid() -> None:
    """A Job not yet created: the Job strategy's batch.kubernetes.io/job-name template label survives Kueue's
    cleanLabels, LocalQueueDefaulting names the "default" LocalQueue, and the name hashes the stand-in uid (Kueue
    gives job-train-6a89b for a Job carrying that uid)."""
    objects = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "default", "namespace": "team-c"},
            "spec": {"clusterQueue": "shared"},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-c"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                        ],
                        "restartPolicy": "Never",
                    }
                }
            },
        },
    ]
    created = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    [wl] = workloads_for(objects, source="jobs.yaml", created=created)
    uid = stand_in_uid("Job", "team-c", "train")
    assert uid == "08ee4c18-95be-5a28-b0ad-67fe96bc5b3a"
    assert wl["metadata"]["name"] == "job-train-6a89b"
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": uid}
    assert wl["metadata"]["creationTimestamp"] == "2026-11-28T12:00:00Z"
    assert wl["spec"]["queueName"] == "default"
    [ps] = wl["spec"]["podSets"]
    assert ps["template"]["metadata"] == {"labels": {"batch.kubernetes.io/job-name": "train"}}
    assert ps["template"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert (ps["count"], wl["spec"]["priority"]) == (1, 0) and "priorityClassRef" not in wl["spec"]


def test_job_count_is_parallelism_capped_by_completions() -> None:
    """jobs/job podsCount: min(parallelism, completions); parallelism defaults to 1."""

    def job(spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {**spec, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        }

    counts = [
        workloads_for([job(s)], source="x")[0]["spec"]["podSets"][0]["count"]
        for s in (
            {},
            {"parallelism": 8},
            {"parallelism": 8, "completions": 3},
            {"completions": 5},
            {"parallelism": 0},
        )
    ]
    assert counts == [1, 8, 3, 1, 0]


ROLE_HASHES = [  # GenerateRoleHash over these specs, computed by Kueue's own function
    ({}, "b18935ae"),
    ({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1"}}}]}, "70f481b0"),
    (
        {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1000m", "memory": "1000m"}}}]},
        "70f481b0",
    ),
    (
        {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "1500m"}}}]},
        "969423ed",
    ),
    ({"containers": [{"name": "c", "resources": {"requests": {"cpu": "0.5", "memory": "0.5"}}}]}, "0114d6e9"),
    (
        {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1024Mi", "memory": "1024Mi"}}}]},
        "b6836c59",
    ),
    ({"containers": [], "nodeSelector": {}, "tolerations": [], "affinity": {}}, "c312cf60"),
]


@pytest.mark.parametrize(("spec", "expected"), ROLE_HASHES)
def test_role_hash_is_kueues(spec: dict[str, Any], expected: str) -> None:
    assert role_hash(spec) == expected


def test_role_hash_of_a_spec_with_every_shaped_field() -> None:
    """Ports, requests, node selector with characters Go escapes, tolerations, affinity of every kind, spread
    constraints, resource claims, overhead, runtime class, priority: Kueue's function gives 9a28c5c5."""
    spec = {
        "containers": [
            {
                "name": "a",
                "ports": [
                    {"containerPort": 80},
                    {"name": "h", "containerPort": 8080, "protocol": "TCP", "hostPort": 0, "hostIP": "<&>"},
                ],
                "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "4"}, "limits": {"cpu": "8"}},
            }
        ],
        "initContainers": [{"name": "i", "resources": {}}],
        "nodeSelector": {"node-type": "gpu", "a<b": "x&y\u2028"},
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {"operator": "Exists"},
        ],
        "priority": 0,
        "runtimeClassName": "nvidia",
        "overhead": {"cpu": "250m"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "k", "operator": "In", "values": ["a", "b"]},
                                {"key": "e", "operator": "Exists"},
                            ]
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {
                            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]
                        },
                    }
                ],
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": "x"}},
                            "namespaces": [],
                        },
                    }
                ]
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "zone", "namespaceSelector": {}, "matchLabelKeys": ["pod-template-hash"]}
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]},
                "minDomains": 2,
                "nodeTaintsPolicy": "Honor",
            }
        ],
        "resourceClaims": [
            {"name": "gpu", "resourceClaimTemplateName": "t"},
            {"name": "x", "resourceClaimName": ""},
        ],
    }
    assert role_hash(spec) == "9a28c5c5"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", "1"),
        ("1000m", "1"),
        ("1500m", "1500m"),
        ("0.5", "500m"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("3072Ki", "3Mi"),
        ("12Gi", "12Gi"),
        ("1e3", "1e3"),
        ("2000", "2k"),
        (2, "2"),
        (0.5, "500m"),
        ("0", "0"),
        ("100M", "100M"),
        ("01", "01"),
    ],
)
def test_quantity_string_is_resource_quantitys(raw: object, expected: str) -> None:
    """resource.Quantity's JSON string: canonical, except a string ParseQuantity keeps as written."""
    assert quantity_string(raw) == expected


def test_deployment_and_statefulset_pods_as_kueue_admits_them() -> None:
    """A Deployment's pods are plain-pod Workloads; a StatefulSet's one fast-admission group. The pods are what the
    API server stores after defaulting and admission; their role hashes are Kueue's for those specs."""
    objects = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "serving"},
            "value": 500,
            "globalDefault": True,
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {
                "name": "db",
                "namespace": "team-a",
                "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
            },
            "spec": {
                "replicas": 3,
                "serviceName": "db",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "i",
                                "ports": [{"containerPort": 5432}],
                                "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "serve",
                "namespace": "team-a",
                "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
            },
            "spec": {
                "replicas": 2,
                "template": {
                    "metadata": {"labels": {"app": "s"}},
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                        ]
                    },
                },
            },
        },
    ]
    got = _by_name(
        workloads_for(objects, source="apps.yaml", integrations={"pod", "deployment", "statefulset"})
    )
    sts = got[workload_name("db", "", "StatefulSet", "apps")]
    [ps] = sts["spec"]["podSets"]
    spec = ps["template"]["spec"]
    assert ps["count"] == 3 and ps["name"] == role_hash(spec)
    assert spec["hostname"] == "db-0" and spec["subdomain"] == "db"
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}  # from limits
    assert spec["containers"][0]["ports"] == [{"containerPort": 5432, "protocol": "TCP"}]
    assert [t["key"] for t in spec["tolerations"]] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    assert spec["schedulingGates"] == [
        {"name": "kueue.x-k8s.io/admission"},
        {"name": "kueue.x-k8s.io/topology"},
    ]
    assert (spec["priority"], spec["priorityClassName"]) == (500, "serving")
    assert sts["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true"}
    assert [o["name"] for o in sts["metadata"]["ownerReferences"]] == ["db-0", "db-1", "db-2"]
    assert sts["spec"]["priority"] == 500 and sts["spec"]["queueName"] == "team-a"
    serve = [w for n, w in got.items() if n.startswith("pod-serve-")]
    assert len(serve) == 2
    for w in serve:
        [ps] = w["spec"]["podSets"]
        assert (ps["name"], ps["count"]) == ("main", 1)
        assert ps["topologyRequest"] == {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}
    assert sts["spec"]["podSets"][0]["name"] == "a11d145f"  # Kueue's GenerateRoleHash of that admitted spec


def test_manage_jobs_without_queue_name() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "a"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    none = read_jobs([job], source="x")
    assert none.workloads == [] and "no kueue.x-k8s.io/queue-name label" in none.skipped[0].reason
    [wl] = workloads_for([job], source="x", manage_jobs_without_queue_name=True)
    assert wl["spec"]["queueName"] == ""


def _job(
    name: str = "j",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    uid: str | None = "5d0c7a1e-0000-4000-8000-00000000000a",
    namespace: str = "team-a",
    spec: dict[str, Any] | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"kueue.x-k8s.io/queue-name": "team-a", **(labels or {})},
    }
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = annotations
    if owner:
        meta["ownerReferences"] = [owner]
    doc: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": True,
            "parallelism": 2,
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}},
            **(spec or {}),
        },
    }
    if status:
        doc["status"] = status
    return doc


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        ([_job(status={"conditions": [{"type": "Complete", "status": "True"}]})], "finished (Complete)"),
        (
            [_job(spec={"suspend": False}, status={"active": 2})],
            "running outside Kueue's quota (2 active pods",
        ),
        (
            [_job(labels={"kueue.x-k8s.io/priority-class": "missing"})],
            'workloadpriorityclasses.kueue.x-k8s.io "missing" not found',
        ),
        (
            [
                _job(
                    spec={
                        "template": {
                            "spec": {"priorityClassName": "gone", "containers": [{"name": "c", "image": "i"}]}
                        }
                    }
                )
            ],
            'priorityclasses.scheduling.k8s.io "gone" not found',
        ),
        ([_job(namespace="kube-system")], "namespace kube-system is outside managedJobsNamespaceSelector"),
        ([_job(labels={"kueue.x-k8s.io/prebuilt-workload-name": "wl-1"})], "uses the prebuilt Workload wl-1"),
        (
            [
                _job(
                    owner={
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": "js",
                        "uid": "u",
                        "controller": True,
                    }
                )
            ],
            "managed through its owner JobSet js",
        ),
        (
            [
                _job(),
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Workload",
                    "metadata": {
                        "name": "job-j-00000",
                        "namespace": "team-a",
                        "ownerReferences": [
                            {
                                "apiVersion": "batch/v1",
                                "kind": "Job",
                                "name": "j",
                                "controller": True,
                                "uid": "5d0c7a1e-0000-4000-8000-00000000000a",
                            }
                        ],
                    },
                    "spec": {
                        "queueName": "team-a",
                        "podSets": [{"name": "main", "count": 1, "template": {"spec": {}}}],
                    },
                },
            ],
            "its Workload is in the input",
        ),
        (
            [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayJob",
                    "metadata": {"name": "r", "namespace": "a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                    "spec": {"clusterSelector": {"ray.io/cluster": "shared"}},
                }
            ],
            "runs on an existing RayCluster",
        ),
    ],
)
def test_jobs_kueue_creates_no_workload_for(objects: list[dict[str, Any]], reason: str) -> None:
    result = read_jobs(objects, source="x", integrations=ALL)
    assert result.workloads == []
    [skipped] = result.skipped
    assert reason in skipped.reason


def test_a_pod_group_waits_for_all_its_pods() -> None:
    pods: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"g-{i}",
                "namespace": "ns",
                "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/pod-group-name": "grp"},
                "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
            },
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
        for i in range(2)
    ]
    result = read_jobs(pods, source="pods.yaml", integrations={"pod"})
    assert result.workloads == []
    assert result.skipped[0].reason == "'grp' group has fewer runnable pods than expected"
    third = copy.deepcopy(pods[0])
    third["metadata"] = {**third["metadata"], "name": "g-2"}
    pods.append(third)
    [wl] = workloads_for(pods, source="pods.yaml", integrations={"pod"})
    [ps] = wl["spec"]["podSets"]
    assert ps["count"] == 3 and ps["name"] == role_hash(ps["template"]["spec"])


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        (
            _job(labels={"kueue.x-k8s.io/queue-name": "Team_A"}),
            "Job team-a/j: metadata.labels[kueue.x-k8s.io/queue-name]",
            "Invalid value: 'Team_A'",
        ),
        (
            _job(annotations={"kueue.x-k8s.io/job-min-parallelism": "2"}),
            "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]",
            "Invalid value: 2: should be between 0 and 1",
        ),
        (
            _job(labels={"kueue.x-k8s.io/max-exec-time-seconds": "0"}),
            "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]",
            "should be greater than 0",
        ),
        (_job(spec={"parallelism": "two"}), "Job team-a/j: spec.parallelism", "must be an integer"),
        (
            _job(
                spec={
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}
                    }
                }
            ),
            "spec.template.spec.containers[0].resources.requests.cpu",
            "invalid quantity",
        ),
        (_job(spec={"template": None}), "Job team-a/j: spec.template", "Required value"),
        (
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayJob",
                "metadata": {"name": "r", "namespace": "a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": {}}}}},
            },
            "RayJob a/r: spec.shutdownAfterJobFinishes",
            "should delete the cluster after finishing",
        ),
        (
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {"name": "r", "namespace": "a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {
                    "headGroupSpec": {"template": {"spec": {}}},
                    "workerGroupSpecs": [{"groupName": f"g{i}", "template": {"spec": {}}} for i in range(8)],
                },
            },
            "RayCluster a/r: spec.workerGroupSpecs",
            "Too many: 8: must have at most 7 items",
        ),
        (
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {"name": "r", "namespace": "a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {
                    "headGroupSpec": {"template": {"spec": {}}},
                    "workerGroupSpecs": [{"groupName": "head", "replicas": "1", "template": {"spec": {}}}],
                },
            },
            "RayCluster a/r: spec.workerGroupSpecs[0].replicas",
            "Expected `int | null`, got `str`",
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "p",
                    "namespace": "a",
                    "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/pod-group-name": "g"},
                },
                "spec": {"containers": []},
            },
            "Pod a/p: metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
            "Required value: both the",
        ),
    ],
)
def test_bad_jobs_are_input_errors_naming_the_field(doc: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        read_jobs([doc], source="jobs.yaml", integrations=ALL)
    line = err.value.line()
    assert line.startswith("jobs.yaml: ") and field in line and message in line, line


def test_unknown_integration_is_an_input_error() -> None:
    with pytest.raises(InputError, match=re.escape("unknown integration 'kubeflow.org/mpijob'")):
        read_jobs([], source="x", integrations={"kubeflow.org/mpijob"})
