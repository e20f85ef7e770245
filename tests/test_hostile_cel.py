"""CEL runtime errors in DRA device selectors are the pod's result, never a traceback.

kube-scheduler's DynamicResources Filter fails on a node where evaluating a selector errs (a division by
zero, a 64-bit integer overflow, a conversion that fails): the pod is unschedulable with the error in its
message, and every other pod is simulated as before. A capacity the API server accepts (``1e400`` is a valid
Quantity) is evaluated; an attribute int beyond int64 is refused by the API server's decoder: bad input.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostile_inputs import invoke
from kgpu.errors import InputError
from kgpu.sim.simulate import SCHEDULED, UNSCHEDULABLE
from test_dra import claim_pod, gpu_class, gpu_device, gpu_slice, nodes, run, template
from test_dra_doctor import N1, classes, dra_node, kubelet_plugin, report, slices
from test_dra_doctor import claim_pod as doctor_claim_pod
from test_dra_doctor import template as doctor_template

ERROR = 'running "DynamicResources" filter plugin: claim default/p-gpu: selector #0: CEL runtime error: '
MEMORY = "device.capacity['gpu.nvidia.com'].memory"


@pytest.mark.parametrize(
    ("selector", "error"),
    [
        ("1 / 0 == 1", "division by zero"),
        ("1 % 0 == 0", "modulus by zero"),
        ("9223372036854775807 + 1 > 0", "integer overflow"),
        ("-9223372036854775808 - 1 < 0", "integer overflow"),
        ("9223372036854775807 * 2 > 0", "integer overflow"),
        ("-9223372036854775808 / -1 == 0", "integer overflow"),
        ("int(1e300) > 0", "int: integer overflow"),
        ("int('x') == 1", "int: string parse error"),
        ("double('x') > 0.0", "double: string parse error"),
        ("quantity('abc').sign() > 0", "quantity: invalid quantity: 'abc'"),
        ("semver('x').major() > 0", "semver: invalid semver: x"),
    ],
)
def test_a_runtime_error_is_the_pods_filter_failure(selector: str, error: str) -> None:
    cl = [*nodes("n1"), gpu_class(), gpu_slice("n1", 1), template(selectors=[selector]),
          template("plain")]
    out = run(cl, [claim_pod("p"), claim_pod("q", tpl="plain")])
    assert out["p"].phase == UNSCHEDULABLE
    assert out["p"].reason.startswith(ERROR + error), out["p"].reason
    assert out["q"].phase == SCHEDULED and out["q"].devices[0]["device"] == "gpu-0"


def test_a_device_class_selector_that_errs_fails_its_pods_only() -> None:
    bad = gpu_class("broken.nvidia.com", "device.attributes['gpu.nvidia.com'].index / 0 == 0")
    tpl = template("broken")
    tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "broken.nvidia.com"
    out = run([*nodes("n1"), gpu_class(), bad, gpu_slice("n1", 1), tpl, template()],
              [claim_pod("p", tpl="broken"), claim_pod("q")])
    assert out["p"].phase == UNSCHEDULABLE
    assert "class broken.nvidia.com: selector #0: CEL runtime error: division by zero" in out["p"].reason
    assert out["q"].phase == SCHEDULED


def test_a_capacity_beyond_int64_is_a_valid_quantity_and_is_evaluated() -> None:
    """``1e400`` parses as a Quantity (apimachinery keeps it in an inf.Dec): the slice is accepted, its
    device bound to CEL, and compared as a quantity; asInteger() is the error Kubernetes' library returns."""
    def one(selector: str | None) -> Any:
        tpl = template(selectors=[selector]) if selector else template()
        return run([*nodes("n1"), gpu_class(), gpu_slice("n1", 1, memory="1e400"), tpl], [claim_pod("p")])["p"]

    assert one(None).phase == SCHEDULED
    assert one(f"{MEMORY}.compareTo(quantity('70Gi')) > 0").phase == SCHEDULED
    assert one(f"{MEMORY}.isGreaterThan(quantity('1e399'))").phase == SCHEDULED
    assert one(f"{MEMORY}.isLessThan(quantity('1e399'))").phase == UNSCHEDULABLE
    assert one(f"{MEMORY}.add(1).sign() == 1").phase == SCHEDULED
    assert one(f"{MEMORY}.asApproximateFloat() > 1e300").phase == SCHEDULED
    assert one("quantity('1e400').isGreaterThan(quantity('1'))").phase == SCHEDULED
    failed = one(f"{MEMORY}.asInteger() > 0")
    assert failed.phase == UNSCHEDULABLE
    assert failed.reason == ERROR + "asInteger: cannot convert value to integer"


def test_an_attribute_int_beyond_int64_is_bad_input() -> None:
    d = gpu_device(0, "n1")
    d["attributes"]["index"] = {"int": 2**63}
    with pytest.raises(InputError) as err:
        run([*nodes("n1"), gpu_class(), gpu_slice("n1", devices=[d]), template()], [claim_pod("p")])
    text = str(err.value)
    assert "ResourceSlice n1-gpu.nvidia.com-abcde: spec.devices[0].attributes[index].int" in text
    assert "64-bit integer" in text


def test_simulate_cli_runs_on_and_exits_1(tmp_path: Path) -> None:
    cl = [*nodes("n1"), gpu_class(), gpu_slice("n1", 2, memory="1e400"),
          template(selectors=["9223372036854775807 + 1 > 0"]), template("plain"),
          template("bad-quantity", selectors=["quantity('abc').sign() > 0"])]
    cluster = tmp_path / "cluster.yaml"
    work = tmp_path / "work.yaml"
    cluster.write_text(yaml.safe_dump_all(cl))
    work.write_text(yaml.safe_dump_all([claim_pod("p"), claim_pod("q", tpl="plain"),
                                        claim_pod("r", tpl="bad-quantity")]))
    res = invoke(["simulate", "-c", str(cluster), "-w", str(work), "-o", "json"])
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.stderr and not res.stderr.strip(), res.stderr
    pods = {p["name"]: p for p in json.loads(res.stdout)["pods"]}
    assert pods["p"]["phase"] == UNSCHEDULABLE and "CEL runtime error: integer overflow" in pods["p"]["reason"]
    assert pods["q"]["phase"] == SCHEDULED
    assert "CEL runtime error: quantity: invalid quantity: 'abc'" in pods["r"]["reason"]


def test_doctor_reports_the_error_as_the_claims_pending_reason() -> None:
    tpl = doctor_template()
    tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": "1 / 0 == 1"}}]
    items = [dra_node(N1), *slices(N1), kubelet_plugin(), *classes(), tpl, doctor_claim_pod("train-1")]
    found = [f for f in report(copy.deepcopy(items)).findings if f.check == "dra-claim-pending"]
    assert len(found) == 1 and found[0].object == "Pod/ml/train-1"
    assert "CEL runtime error: division by zero" in found[0].message


def test_doctor_says_a_selector_it_cannot_simulate_and_goes_on() -> None:
    """A DeviceClass whose selector is over the cost limit (an older API server stored it): doctor's other checks
    still run; the pending pod's check says which object and why, once."""
    items = [dra_node(N1), *slices(N1), kubelet_plugin(), *classes(), doctor_template(), doctor_claim_pod("train-1")]
    nums = "[" + ", ".join(str(i) for i in range(100)) + "]"
    costly = copy.deepcopy(next(o for o in items if o["kind"] == "DeviceClass"))
    costly["metadata"]["name"] = "costly.nvidia.com"
    costly["spec"]["selectors"] = [{"cel": {"expression": f"{nums}.all(x, {nums}.all(y, {nums}.all(z, x > z)))"}}]
    found = report([*items, costly]).findings
    pending = [f for f in found if f.check == "dra-claim-pending"]
    assert len(pending) == 1 and pending[0].object == "DeviceClass costly.nvidia.com", pending
    assert "cannot simulate the claims: spec.selectors[0].cel.expression: Forbidden: too complex" in pending[0].message
