"""Malformed Karpenter NodeOverlays are bad input: exit 2 with one line naming the file, the object and the
field (what the NodeOverlay CRD's schema makes the API server refuse, and a capacity no Node could have),
never an AttributeError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgpu.errors import InputError
from kgpu.sim.provisioners.karpenter.overlay import parse_overlay
from test_hostile_regressions import NODE, input_error, pod, write

ITYPE = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]}


def overlay(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "gpu-slices"},
            "spec": {"requirements": [ITYPE], **spec}}


BAD = [
    ({"capacity": ["nvidia.com/gpu"]}, "spec.capacity", "must be a map of resource name to quantity"),
    ({"capacity": "nvidia.com/gpu"}, "spec.capacity", "must be a map of resource name to quantity"),
    ({"capacity": {"nvidia.com/gpu": "-1"}}, "spec.capacity.nvidia.com/gpu", "must be greater than or equal to 0"),
    ({"capacity": {"nvidia.com/gpu": -4}}, "spec.capacity.nvidia.com/gpu", "must be greater than or equal to 0"),
    ({"capacity": {"nvidia.com/gpu": "1e400"}}, "spec.capacity.nvidia.com/gpu", "too large"),
    ({"capacity": {"bad key!": "1"}}, "spec.capacity.bad key!", "'bad key!' is not a resource name"),
    ({"capacity": {"": "1"}}, "spec.capacity.", "is not a resource name"),
    ({"price": 5}, "spec.price", "must be a string (the CRD's type), got 5"),
    ({"price": 0.5}, "spec.price", "must be a string"),
    ({"priceAdjustment": -10}, "spec.priceAdjustment", "must be a string"),
    ({"requirements": [{"key": 5, "operator": "Exists"}]}, "spec.requirements[0].key", "the CRD's pattern"),
    ({"requirements": [{"key": "team name", "operator": "Exists"}]}, "spec.requirements[0].key", "the CRD's pattern"),
    ({"requirements": [{"key": "team", "operator": "In", "values": "abc"}]}, "spec.requirements[0].values",
     "must be a list of strings"),
    ({"requirements": [{"key": "team", "operator": "In", "values": [1]}]}, "spec.requirements[0].values",
     "must be a list of strings"),
    ({"requirements": [ITYPE] * 101}, "spec.requirements", "at most 100"),
]


@pytest.mark.parametrize(("spec", "field", "words"), BAD, ids=[b[1] + ":" + b[2][:20] for b in BAD])
def test_parse_overlay_names_the_field(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        parse_overlay(overlay(**spec), "o.yaml")
    assert err.value.where == f"o.yaml: NodeOverlay gpu-slices: {field}"
    assert words in err.value.message


@pytest.mark.parametrize(("spec", "field", "words"), [BAD[0], BAD[2], BAD[5], BAD[7]],
                         ids=["list", "negative", "key", "int-price"])
def test_simulate_exits_2_naming_file_object_and_field(tmp_path: Path, spec: dict[str, Any], field: str,
                                                       words: str) -> None:
    cluster = write(tmp_path / "cluster.yaml", [NODE, overlay(**spec)])
    work = write(tmp_path / "pod.yaml", pod())
    line = input_error(["simulate", "-c", cluster, "-w", work], "cluster.yaml", words)
    assert f"{cluster}: NodeOverlay gpu-slices: {field}" in line
    # the same overlay given with the workloads
    over = write(tmp_path / "overlay.yaml", overlay(**spec))
    line = input_error(["simulate", "-c", write(tmp_path / "node.yaml", NODE), "-w", work, "-w", over],
                       "overlay.yaml", words)
    assert f"{over}: NodeOverlay gpu-slices: {field}" in line


def test_a_metadata_that_is_not_a_map_is_named() -> None:
    doc = overlay()
    doc["metadata"] = ["gpu-slices"]
    with pytest.raises(InputError) as err:
        parse_overlay(doc, "o.yaml")
    assert "metadata.name is required" in err.value.message


def test_valid_overlays_still_parse() -> None:
    ov = parse_overlay(overlay(capacity={"nvidia.com/gpu": "4", "hugepages-2Mi": "1Gi"}, price="0.5", weight=10),
                       "o.yaml")
    assert dict(ov.capacity) == {"nvidia.com/gpu": 4, "hugepages-2Mi": 2**30}
    assert ov.price == "0.5" and ov.weight == 10
    assert parse_overlay(overlay(priceAdjustment="-10%"), "o.yaml").price == "-10%"


@pytest.mark.parametrize(("spec", "field", "words"), [BAD[0], BAD[2], BAD[5], BAD[7]],
                         ids=["list", "negative", "key", "int-price"])
def test_doctor_gives_the_same_verdict_as_simulate(tmp_path: Path, spec: dict[str, Any], field: str,
                                                   words: str) -> None:
    """One reader, one verdict: doctor --snapshot refuses the overlay simulate refuses, naming the same field."""
    import json

    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [NODE, overlay(**spec)]}),
                    encoding="utf-8")
    line = input_error(["doctor", "--snapshot", str(snap)], "snap.json", words)
    assert f"NodeOverlay gpu-slices: {field}" in line


def test_items_null_is_an_empty_list_for_every_verb(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from kgpu.cli.main import cli

    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": None}), encoding="utf-8")
    for args in (["doctor", "--snapshot", str(snap)], ["simulate", "-c", str(snap)]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, (args, res.output)
