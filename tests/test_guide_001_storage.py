"""Seed 001's persistent storage: its GPU node groups carry `withAddonPolicies: {ebs, fsx, efs}` "if the
workloads need AWS storage services", and it advises dedicated volumes for datasets, checkpoints and logs that
survive instance termination. The profile's `storage.volumes` renders them as the CSI drivers take them
(StorageClass + PersistentVolumeClaim, the drivers' EKS add-ons in eksctl.yaml), validated against eksctl's
schema and the core Kubernetes schemas; `kgpu plan` places a training pod that mounts an EBS checkpoint volume
pinned to us-west-2b on that zone's GPU node group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kgpu.cli.main import cli
from kgpu.errors import InputError
from kgpu.model.profile import parse_profile
from kgpu.render.stack import VALUES_TARGETS, render_files, render_stack
from kgpu.render.validate import validate_stack

# Seed 001, the GPU node group's IAM (section 2.2), as the guide writes it
GUIDE_IAM = """
iam:
  withAddonPolicies:
    autoScaler: true
    ebs: true
    fsx: true
    efs: true
    albIngress: true
    cloudWatch: true
"""
STORAGE = """
volumes:
  - name: datasets
    namespace: ml
    type: fsx-lustre
    size: 1200Gi
    subnetId: subnet-0a1b2c3d4e5f60718
    securityGroupIds: [sg-0123456789abcdef0]
    deploymentType: SCRATCH_2
    s3ImportPath: s3://gaia-datasets/imagenet
  - name: checkpoints
    namespace: ml
    type: ebs
    size: 200Gi
    zone: us-west-2b
    iops: 6000
    throughput: 250
  - name: logs
    namespace: ml
    type: efs
    fileSystemId: fs-0123456789abcdef0
"""
TRAIN = """apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: OnFailure
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: train
        image: nvcr.io/nvidia/pytorch:24.08-py3
        resources: {limits: {nvidia.com/gpu: 1}}
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: ckpt, mountPath: /checkpoints}
        - {name: logs, mountPath: /logs}
      volumes:
      - {name: data, persistentVolumeClaim: {claimName: datasets}}
      - {name: ckpt, persistentVolumeClaim: {claimName: checkpoints}}
      - {name: logs, persistentVolumeClaim: {claimName: logs}}
"""


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _profile_data(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "kgpu.yaml"
    assert _invoke("init", "-t", "eks-eksctl", "-f", str(path), "--force").exit_code == 0
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    policies = yaml.safe_load(GUIDE_IAM)["iam"]["withAddonPolicies"]
    for pool in data["pools"]:
        if pool["name"] == "gpu-spot-ng":
            pool["iamAddonPolicies"] = [k for k, on in policies.items() if on]
    data["storage"] = yaml.safe_load(STORAGE)
    return data


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "kgpu.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_storage_renders_as_the_csi_drivers_take_it(tmp_path: Path) -> None:
    """StorageClasses with the drivers' provisioners and parameters, claims of those classes, and the guide's
    node-role policies beside the drivers' add-ons."""
    profile = parse_profile(_profile_data(tmp_path))
    stack = render_stack(profile)
    docs = {(d["kind"], d["metadata"]["name"]): d for d in stack["storage"]}
    ebs = docs[("StorageClass", "kgpu-checkpoints")]
    assert ebs["provisioner"] == "ebs.csi.aws.com"
    assert ebs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert ebs["parameters"] == {"type": "gp3", "iops": "6000", "throughput": "250", "encrypted": "true",
                                 "csi.storage.k8s.io/fstype": "ext4"}
    assert ebs["allowedTopologies"] == [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                                                    "values": ["us-west-2b"]}]}]
    efs = docs[("StorageClass", "kgpu-logs")]
    assert efs["provisioner"] == "efs.csi.aws.com"
    assert efs["parameters"]["provisioningMode"] == "efs-ap" and efs["parameters"]["fileSystemId"] == "fs-0123456789abcdef0"
    fsx = docs[("StorageClass", "kgpu-datasets")]
    assert fsx["provisioner"] == "fsx.csi.aws.com"
    assert fsx["parameters"]["subnetId"] == "subnet-0a1b2c3d4e5f60718"
    assert fsx["parameters"]["securityGroupIds"] == "sg-0123456789abcdef0"
    assert fsx["parameters"]["deploymentType"] == "SCRATCH_2" and fsx["mountOptions"] == ["flock"]
    claim = docs[("PersistentVolumeClaim", "checkpoints")]
    assert claim["metadata"]["namespace"] == "ml"
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "kgpu-checkpoints",
                             "resources": {"requests": {"storage": "200Gi"}}}
    assert docs[("PersistentVolumeClaim", "logs")]["spec"]["accessModes"] == ["ReadWriteMany"]
    assert ("Namespace", "ml") in docs
    # apply order: the namespace and classes before the claims
    kinds = [d["kind"] for d in stack["storage"]]
    assert kinds.index("Namespace") < kinds.index("StorageClass") < kinds.index("PersistentVolumeClaim")
    [config] = stack["eksctl"]
    assert config["addons"] == [
        {"name": "aws-ebs-csi-driver", "wellKnownPolicies": {"ebsCSIController": True}},
        {"name": "aws-efs-csi-driver", "wellKnownPolicies": {"efsCSIController": True}},
        {"name": "aws-fsx-csi-driver", "attachPolicyARNs": ["arn:aws:iam::aws:policy/AmazonFSxFullAccess"]},
    ]
    assert config["iam"]["withOIDC"] is True  # the add-ons' roles are IAM roles for service accounts
    gpu = [g for g in config["nodeGroups"] if g["name"].startswith("gpu-spot-ng")]
    assert len(gpu) == 3
    for group in gpu:  # the guide's withAddonPolicies, on every per-zone GPU group
        assert group["iam"]["withAddonPolicies"] == yaml.safe_load(GUIDE_IAM)["iam"]["withAddonPolicies"]


def test_storage_validates_against_the_upstream_schemas(tmp_path: Path) -> None:
    """eksctl's JSON schema (addons, wellKnownPolicies) and the core schemas (StorageClass, PVC), strict."""
    profile = parse_profile(_profile_data(tmp_path))
    stack = render_stack(profile, ["eksctl", "storage"])
    report = validate_stack(stack, kubernetes_version=profile.cluster.kubernetes_version, skip_targets=VALUES_TARGETS)
    assert report.ok, report.errors
    assert not [s for s in report.skipped if "StorageClass" in s or "PersistentVolumeClaim" in s]
    # a field the schema does not know is caught: the check is real
    stack["storage"][1]["spec"] = {"volumeBindingMode": "Immediate"}
    assert not validate_stack(stack, kubernetes_version="1.33", skip_targets=VALUES_TARGETS).ok


def test_storage_file_says_how_the_drivers_are_installed(tmp_path: Path) -> None:
    """The file's header: the add-ons are in eksctl.yaml for this profile; on a Karpenter profile, the
    eksctl commands that install them with their IAM roles."""
    text = render_files(parse_profile(_profile_data(tmp_path)))["storage.yaml"]
    assert "# The CSI drivers (aws-ebs-csi-driver, aws-efs-csi-driver, aws-fsx-csi-driver) are EKS add-ons in eksctl.yaml" in text
    assert "kind: PersistentVolumeClaim" in text
    karpenter = _invoke("init", "-t", "eks-karpenter", "-f", str(tmp_path / "k.yaml"), "--force")
    assert karpenter.exit_code == 0
    data = yaml.safe_load((tmp_path / "k.yaml").read_text())
    data["storage"] = {"volumes": [{"name": "checkpoints", "type": "ebs", "size": "200Gi"}]}
    text = render_files(parse_profile(data))["storage.yaml"]
    assert ("eksctl create iamserviceaccount --cluster " in text and "--name ebs-csi-controller-sa" in text
            and "AmazonEBSCSIDriverPolicy" in text and "eksctl create addon --cluster " in text)
    assert "eksctl.yaml" not in render_files(parse_profile(data))


def test_plan_places_the_trainer_in_the_checkpoint_volume_zone(tmp_path: Path) -> None:
    """The EBS checkpoint volume is pinned to us-west-2b: cluster-autoscaler scales the 2b GPU group (not 2a,
    which ties on price and sorts first), and the FSx and EFS claims go anywhere."""
    data = _profile_data(tmp_path)
    path = _write(tmp_path, data)
    work = tmp_path / "train.yaml"
    work.write_text(TRAIN)
    result = _invoke("plan", "-f", str(path), "-w", str(work), "-o", "json")
    assert result.exit_code == 0, result.output
    out = yaml.safe_load(result.output)
    [train] = [p for p in out["pods"] if p["name"].startswith("train")]
    assert train["phase"] == "Provisioned" and train["zone"] == "us-west-2b", train
    assert train["warnings"] == []
    # unpinned, the trainer takes the first group; its claim then binds in that zone
    data["storage"]["volumes"][1].pop("zone")
    result = _invoke("plan", "-f", str(_write(tmp_path, data)), "-w", str(work), "-o", "json")
    [train] = [p for p in yaml.safe_load(result.output)["pods"] if p["name"].startswith("train")]
    assert train["zone"] == "us-west-2a"


@pytest.mark.parametrize(
    ("volume", "error"),
    [
        ({"name": "logs", "type": "efs"}, "storage.volumes[0]: fileSystemId: required for an efs volume"),
        ({"name": "d", "type": "fsx-lustre", "size": "1000Gi", "subnetId": "subnet-0a1b2c3d4e5f60718",
          "securityGroupIds": ["sg-0123456789abcdef0"]}, "size: FSx for Lustre SCRATCH_2 takes 1200Gi or a multiple of 2400Gi"),
        ({"name": "c", "type": "ebs", "iops": 90000}, "iops: gp3 takes 3000 to 80000, got 90000"),
        ({"name": "c", "type": "ebs", "accessMode": "ReadWriteMany"}, "accessMode: an EBS volume attaches to one node"),
        ({"name": "c", "type": "ebs", "fileSystemId": "fs-0123456789abcdef0"}, "fileSystemId: only for type efs"),
        ({"name": "c", "type": "ebs", "zone": "eu-west-1a"}, "storage.volumes[0].zone: 'eu-west-1a' is not in cluster.zones"),
        ({"name": "c", "type": "nfs"}, "storage.volumes[0].type: 'nfs' is not one of ebs, efs, fsx-lustre"),
    ],
)
def test_bad_storage_is_one_line_naming_the_field(tmp_path: Path, volume: dict[str, Any], error: str) -> None:
    data = _profile_data(tmp_path)
    data["storage"] = {"volumes": [volume]}
    with pytest.raises(InputError) as info:
        parse_profile(data, source="kgpu.yaml")
    assert error in info.value.line(), info.value.line()
    result = _invoke("render", "-f", str(_write(tmp_path, data)))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
