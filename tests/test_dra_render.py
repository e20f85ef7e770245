"""Rendering NVIDIA's DRA driver for pools with ``gpuAllocation: dra``: the chart's values (checked against its
packaged values.yaml), the DeviceClasses the chart creates (with Helm's adoption metadata, validated by the
core 1.34 schema), the device plugin kept off those pools, the workloads' ResourceClaimTemplates, the
profile's bad inputs, and cluster-autoscaler's DRA flag."""

from __future__ import annotations

from typing import Any

import pytest

from kgpu.catalog.dra import device_classes
from kgpu.errors import InputError
from kgpu.model.load import parse_documents
from kgpu.model.predicates import static_reasons
from kgpu.model.profile import parse_profile
from kgpu.render import consistency, deviceplugin, dra, eksctl, workloads
from kgpu.render.stack import VALUES_TARGETS, applicable_targets, render_files, render_stack
from kgpu.render.validate import chart_values_errors, validate_document, validate_stack


def profile_dict(*pools: dict[str, Any], autoscaler: str = "karpenter", version: str = "1.34", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": "dra-test"},
        "provider": "eks",
        "cluster": {"name": "demo", "region": "us-west-2", "zones": ["us-west-2a", "us-west-2b"], "kubernetesVersion": version},
        "autoscaler": autoscaler,
        "pools": list(pools),
        **extra,
    }


TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def dra_pool(name: str = "gpu-dra", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "karpenter", "gpuAllocation": "dra", "requirements": {"gpuNames": ["a10g"]},
            "taints": [TAINT, {"key": "team", "value": "ml", "effect": "NoSchedule"}], **extra}


def plugin_pool(name: str = "gpu-plugin") -> dict[str, Any]:
    return {"name": name, "kind": "karpenter", "requirements": {"gpuNames": ["t4"]}, "taints": [TAINT]}


def mixed() -> Any:
    return parse_profile(profile_dict({"name": "system", "kind": "karpenter", "instanceTypes": ["m5.xlarge"]},
                                      dra_pool(), plugin_pool()))


def test_targets_appear_only_for_a_profile_with_a_dra_pool() -> None:
    assert {"dra-driver", "dra-driver-chart"} <= set(applicable_targets(mixed()))
    plain = parse_profile(profile_dict(plugin_pool()))
    assert not {"dra-driver", "dra-driver-chart"} & set(applicable_targets(plain))


def test_chart_values_enable_gpus_with_the_override_and_every_key_is_the_charts() -> None:
    (values,) = dra.chart_values(mixed())
    assert values["resources"]["gpus"]["enabled"] is True
    assert values["gpuResourcesEnabledOverride"] is True  # the chart fails on gpus.enabled without it
    assert values["resources"]["computeDomains"]["enabled"] is False
    assert values["nvidiaDriverRoot"] == "/"
    assert chart_values_errors(values, "nvidia-dra-driver-gpu.helm-values.yaml") == []
    # the check is real: a misspelt key is caught
    bad = {"resources": {"gpu": {"enabled": True}}, "kubeletPlugin": {"tolerations": []}}
    assert chart_values_errors(bad, "nvidia-dra-driver-gpu.helm-values.yaml") == [
        "resources.gpu: not a value of the chart (nvidia-dra-driver-gpu.helm-values.yaml)"
    ]


def test_profile_settings_reach_the_values_and_the_helm_command() -> None:
    prof = parse_profile(profile_dict(dra_pool(), draDriver={"version": "25.8.0", "namespace": "dra",
                                                             "nvidiaDriverRoot": "/run/nvidia/driver",
                                                             "computeDomains": True}))
    (values,) = dra.chart_values(prof)
    assert values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert values["resources"]["computeDomains"]["enabled"] is True
    text = render_files(prof, ["dra-driver-chart"])["dra-driver-chart-values.yaml"]
    assert "--version 25.8.0 -n dra --create-namespace" in text
    (gpu_class, _) = dra.render(prof)
    assert gpu_class["metadata"]["annotations"]["meta.helm.sh/release-namespace"] == "dra"


def _kubelet_plugin(values: dict[str, Any]) -> Any:
    """The chart's kubelet-plugin DaemonSet as the values shape it (tolerations, affinity)."""
    doc = {"apiVersion": "apps/v1", "kind": "DaemonSet",
           "metadata": {"name": dra.KUBELET_PLUGIN, "namespace": "nvidia-dra-driver-gpu"},
           "spec": {"selector": {"matchLabels": {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}},
                    "template": {"metadata": {"labels": {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}},
                                 "spec": {"tolerations": values["kubeletPlugin"]["tolerations"],
                                          "affinity": values["kubeletPlugin"]["affinity"],
                                          "containers": [{"name": "gpus", "image": f"{dra.IMAGE}:v25.8.1"}]}}}}
    return parse_documents([doc], "values").daemonsets[0]


def test_kubelet_plugin_runs_on_the_dra_pool_and_nowhere_else() -> None:
    prof = mixed()
    ds = _kubelet_plugin(dra.chart_values(prof)[0])
    (dra_node,) = consistency.pool_nodes(prof, prof.pool("gpu-dra"))
    (plugin_node,) = consistency.pool_nodes(prof, prof.pool("gpu-plugin"))
    assert static_reasons(ds.template, dra_node, detail=True) is None  # both taints tolerated
    assert static_reasons(ds.template, plugin_node, detail=True)


def test_device_plugin_stays_off_the_dra_pool() -> None:
    prof = mixed()
    terms = deviceplugin.node_selector_terms(prof)
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["gpu-plugin"]]
    stack = render_stack(prof)
    assert [p for p in consistency.check(prof, stack) if p.level == "error"] == []


def test_consistency_flags_a_device_plugin_that_would_run_on_a_dra_pool() -> None:
    """A device plugin DaemonSet that selects every GPU node (a hand-made one) is caught."""
    prof = mixed()
    stack = render_stack(prof)
    ds = next(d for d in stack["device-plugin"] if d["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"].pop("affinity")
    ds["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    problems = [p for p in consistency.check(prof, stack) if p.level == "error"]
    assert any("gpu-dra" in p.message and "DRA driver" in p.message for p in problems)


def test_device_classes_are_the_charts_and_validate() -> None:
    docs = dra.render(mixed())
    assert [d["metadata"]["name"] for d in docs] == ["gpu.nvidia.com", "mig.nvidia.com"]
    for doc, chart in zip(docs, device_classes(), strict=True):
        assert doc["spec"] == chart["spec"]
        assert doc["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "Helm"}
        assert doc["metadata"]["annotations"]["meta.helm.sh/release-name"] == "nvidia-dra-driver-gpu"
        assert validate_document(doc, kubernetes_version="1.34") == ([], None)


def test_the_core_schema_rejects_a_broken_device_class() -> None:
    """The DRA kinds are checked by the 1.34 schema, not skipped: an unknown field is an error."""
    doc = dra.render(mixed())[0]
    doc["spec"]["selectors"][0]["cell"] = doc["spec"]["selectors"][0].pop("cel")
    errors, skipped = validate_document(doc, kubernetes_version="1.34")
    assert skipped is None
    assert errors and "cell" in errors[0]


def test_dra_pool_workloads_claim_their_gpus_from_a_template() -> None:
    prof = mixed()
    docs = workloads.render(prof)
    (tpl,) = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    assert tpl["metadata"]["name"] == "gpu-claim-gpu-dra"
    (req,) = tpl["spec"]["spec"]["devices"]["requests"]
    assert req["exactly"] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    job = next(d for d in docs if d["kind"] == "Job" and d["metadata"]["name"] == "gpu-train-gpu-dra")
    spec = job["spec"]["template"]["spec"]
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-claim-gpu-dra"}]
    res = spec["containers"][0]["resources"]
    assert res["claims"] == [{"name": "gpu"}]
    assert "nvidia.com/gpu" not in res.get("limits", {}) and "nvidia.com/gpu" not in res.get("requests", {})
    other = next(d for d in docs if d["kind"] == "Job" and d["metadata"]["name"] == "gpu-train-gpu-plugin")
    assert other["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "resourceClaims" not in other["spec"]["template"]["spec"]


def test_the_whole_stack_validates_with_the_dra_targets() -> None:
    prof = mixed()
    stack = render_stack(prof)
    report = validate_stack(stack, kubernetes_version="1.34", skip_targets=VALUES_TARGETS)
    assert report.errors == []
    assert not [s for s in report.skipped if "DeviceClass" in s or "ResourceClaimTemplate" in s]


def test_rendered_workloads_are_allocated_on_a_node_publishing_the_drivers_slices() -> None:
    """What render writes is what simulate allocates: the DeviceClasses, the template and the pool's pods, on a
    node of the pool publishing kgpu.catalog.dra's slices for a g5.xlarge (1 A10G)."""
    from kgpu.catalog.dra import node_slices
    from kgpu.sim.simulate import simulate

    prof = mixed()
    stack = render_stack(prof, ["dra-driver", "workloads"])
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "ip-10-0-1-5.us-west-2.compute.internal",
                         "labels": {"karpenter.sh/nodepool": "gpu-dra", "kubernetes.io/os": "linux"}},
            "spec": {"taints": [TAINT, {"key": "team", "value": "ml", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"}}}
    slices = node_slices(node["metadata"]["name"], "a10g", 1, 24576)
    cluster = parse_documents([node, *slices, *stack["dra-driver"]], "cluster.yaml")
    pods = [d for d in stack["workloads"] if d["metadata"].get("labels", {}).get("kgpu.dev/pool") in ("gpu-dra", None)
            and d["kind"] in ("Job", "ResourceClaimTemplate")]
    result = simulate(cluster, parse_documents(pods, "workloads.yaml"))
    (train,) = result.placements
    assert train.node == node["metadata"]["name"]
    assert train.devices[0]["device"] == "gpu-0" and train.devices[0]["driver"] == "gpu.nvidia.com"


@pytest.mark.parametrize(
    ("pool", "version", "field", "words"),
    [
        (dra_pool(devicePlugin="daemonset"), "1.34", "pools[0]", "both advertise the same GPUs"),
        (dra_pool(amiFamily="BottlerocketNvidia"), "1.34", "pools[0]", "built in"),
        (dra_pool(sharing={"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}), "1.34",
         "pools[0]", "it configures the device plugin"),
        (dra_pool(), "1.33", "", "kubernetesVersion 1.34 or later"),
        (dra_pool(gpuAllocation="dynamic"), "1.34", "pools[0].gpuAllocation", "is not one of device-plugin, dra"),
    ],
)
def test_bad_dra_profiles_are_one_line_errors(pool: dict[str, Any], version: str, field: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        parse_profile(profile_dict(pool, version=version), source="kgpu.yaml")
    line = err.value.line()
    assert "\n" not in line and words in line
    assert f"kgpu.yaml: {field}" in line


def test_cluster_autoscaler_gets_the_dra_flag_only_with_a_dra_node_group() -> None:
    group = {"name": "gpu", "kind": "nodegroup", "instanceTypes": ["g5.xlarge"], "gpuAllocation": "dra", "minSize": 1}
    prof = parse_profile(profile_dict(group, autoscaler="cluster-autoscaler"))
    (values,) = eksctl.render_autoscaler_values(prof)
    assert values["extraArgs"]["enable-dynamic-resource-allocation"] is True
    plain = parse_profile(profile_dict({**group, "gpuAllocation": "device-plugin"}, autoscaler="cluster-autoscaler"))
    assert "enable-dynamic-resource-allocation" not in eksctl.render_autoscaler_values(plain)[0]["extraArgs"]


def test_cli_renders_and_validates_a_dra_profile_and_refuses_a_bad_one(tmp_path: Any) -> None:
    """`kgpu render --validate --output-dir` writes the DRA files (exit 0); a DRA pool with the device plugin
    forced on is one line naming the pool (exit 2), and nothing is written."""
    import yaml
    from click.testing import CliRunner

    from kgpu.cli.main import cli

    data = profile_dict(dra_pool(), plugin_pool())
    good = tmp_path / "kgpu.yaml"
    good.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["render", "-f", str(good), "--validate", "--output-dir", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "dra-driver.yaml").exists() and (out / "dra-driver-chart-values.yaml").exists()
    values = yaml.safe_load((out / "dra-driver-chart-values.yaml").read_text())
    assert values["resources"]["gpus"]["enabled"] is True
    data["pools"][0]["devicePlugin"] = "daemonset"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(cli, ["render", "-f", str(bad), "--output-dir", str(tmp_path / "none")])
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "pools[0]" in lines[0] and "devicePlugin: daemonset" in lines[0]
    assert not (tmp_path / "none").exists()


def test_ray_workers_on_a_dra_pool_claim_their_gpus_and_the_cluster_validates() -> None:
    from kgpu.render import kuberay

    prof = parse_profile(profile_dict({"name": "cpu", "kind": "karpenter", "instanceTypes": ["m5.xlarge"]},
                                      dra_pool(), plugin_pool(), kuberay={"gpusPerWorker": 2}))
    docs = kuberay.render(prof)
    tpl, ray = docs
    assert tpl["kind"] == "ResourceClaimTemplate" and tpl["metadata"]["name"] == "gpu-claim-gpu-dra-x2"
    assert tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    groups = {g["groupName"]: g for g in ray["spec"]["workerGroupSpecs"]}
    dra_spec = groups["gpu-gpu-dra"]["template"]["spec"]
    assert dra_spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-claim-gpu-dra-x2"}]
    assert "nvidia.com/gpu" not in dra_spec["containers"][0]["resources"]["limits"]
    assert groups["gpu-gpu-dra"]["rayStartParams"]["num-gpus"] == "2"  # Ray still counts the GPUs it gets
    assert groups["gpu-gpu-plugin"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2
    for doc in docs:
        assert validate_document(doc, kubernetes_version="1.34") == ([], None)
