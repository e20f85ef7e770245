"""Doctor's snapshot fixtures are owned as a real cluster owns them: every DaemonSet pod's controller
reference carries its DaemonSet's uid, so simulate observes the running pods instead of creating more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgpu.model.load import parse_text
from kgpu.sim.simulate import simulate

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "snapshots").glob("*.json"))
# A DaemonSet that requests a GPU below its limit: doctor's finding, an input error to simulate.
SIMULATED = [p for p in FIXTURES if p.stem != "workload-gpu-resources"]


def _items(doc: dict) -> list[dict]:
    if "items" in doc:
        return doc["items"]
    return [o for key in ("nodes", "pods", "daemonsets") for o in doc.get(key, [])]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_daemon_pods_point_at_their_daemonset(path: Path) -> None:
    items = _items(json.loads(path.read_text()))
    ds_uids = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["uid"]
        for o in items
        if o.get("kind") == "DaemonSet"
    }
    for o in items:
        for ref in o.get("metadata", {}).get("ownerReferences", []):
            if ref.get("kind") == "DaemonSet" and ref.get("controller"):
                key = (o["metadata"]["namespace"], ref["name"])
                assert key in ds_uids and ref["uid"] == ds_uids[key], (path.name, o["metadata"]["name"])


@pytest.mark.parametrize("path", SIMULATED, ids=lambda p: p.stem)
def test_simulate_creates_no_daemon_pod_on_a_node_that_runs_one(path: Path) -> None:
    cluster = parse_text(path.read_bytes(), str(path))
    running = {(p.node_name, p.owner_name) for p in cluster.pods if p.node_name and p.owner_kind == "DaemonSet"}
    result = simulate(cluster, parse_text(b'{"apiVersion": "v1", "kind": "List", "items": []}', "empty"))
    created = {(pl.node, pl.pod.owner_name) for pl in result.placements if pl.pod.owner_kind == "DaemonSet"}
    assert not created & running
