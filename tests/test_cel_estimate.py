"""DRA selectors' worst-case cost, as the API server estimates it when a DeviceClass or ResourceClaim is created.

The answers in tests/fixtures/cel/cost_oracle.json are the real compiler's (k8s.io/dynamic-resource-allocation
v0.34.4 ``CompileCELExpression``, run by conformance/kube ``cel-cost``): the expressions of its own
compile_test.go, selectors drawn by conformance/tests/cel_cost_draw.py, and nesting at cel-go's parser limits.
`make conformance` checks that the file still holds the compiler's answers and draws new selectors at its seed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostile_inputs import invoke
from kgpu.errors import InputError
from kgpu.sim.scheduler.plugins.cel_estimate import MAX_COST, analyse, estimate
from kgpu.sim.scheduler.plugins.cel_parse import CelParseError
from kgpu.sim.simulate import SCHEDULED
from launch import launched
from test_dra import claim_pod, gpu_class, gpu_device, gpu_slice, nodes, run, template

ORACLE = json.loads((Path(__file__).parent / "fixtures" / "cel" / "cost_oracle.json").read_text())[
    "selectors"
]
COSTED = [r for r in ORACLE if "cost" in r]
TOO_DEEP = [r for r in ORACLE if "recursion" in r.get("error", "")]
NOT_BOOL = "must evaluate to bool or the unknown type, not "
REFUSED_TYPES = [r for r in ORACLE if r.get("error", "").startswith(NOT_BOOL)]
LIST_100 = "[" + ", ".join(str(i) for i in range(100)) + "]"
NESTED_3 = f"{LIST_100}.all(x, {LIST_100}.all(y, {LIST_100}.all(z, x + y + z >= 0)))"


def test_every_estimate_is_the_api_servers() -> None:
    assert len(COSTED) >= 200 and sum(r["cost"] > MAX_COST for r in COSTED) >= 40
    wrong = [
        (r["cost"], estimate(r["expression"]), r["expression"][:120])
        for r in COSTED
        if estimate(r["expression"]) != r["cost"]
    ]
    assert not wrong, f"{len(wrong)} of {len(COSTED)} differ: {wrong[:5]}"


def test_result_types_as_the_api_server_names_them() -> None:
    """A selector whose type is not bool (nor an attribute's google.protobuf.Any) is refused, in the API
    server's words; every selector it takes has a type kgpu takes too."""
    assert len(REFUSED_TYPES) >= 30
    wrong = [
        (r["error"], analyse(r["expression"])[1])
        for r in REFUSED_TYPES
        if r["error"] != NOT_BOOL + str(analyse(r["expression"])[1])
    ]
    assert not wrong, wrong[:5]
    taken = {analyse(r["expression"])[1] for r in COSTED}
    assert taken <= {"bool", "google.protobuf.Any", None}, taken


def test_nesting_beyond_cel_gos_parser_is_refused_like_it() -> None:
    assert len(TOO_DEEP) >= 2
    for r in TOO_DEEP:
        with pytest.raises(CelParseError):
            estimate(r["expression"])
    # far beyond: a chain the length limit allows (10 KiB) neither recurses out nor hangs
    with pytest.raises(CelParseError, match="max recursion depth exceeded"):
        estimate("1+" * 5000 + "1 == 1")
    with pytest.raises(CelParseError):
        estimate("(" * 5000 + "true" + ")" * 5000)


@pytest.mark.parametrize(
    ("expression", "cost"),
    [
        ("device.driver == 'gpu.nvidia.com'", 4),
        # cel-go gives no size to an element of a literal list's join: its result is unbounded, and a comparison
        # with it costs a tenth of that (the API server refuses this selector although it is cheap to run)
        ("['a', 'b'].join() == 'ab'", 1844674407370955275),
    ],
)
def test_estimates_of_note(expression: str, cost: int) -> None:
    assert estimate(expression) == cost


def _claim_with(selector: str) -> Any:
    return run(
        [*nodes("n1"), gpu_class(), gpu_slice("n1", 1), template(selectors=[selector])], [claim_pod("p")]
    )


def test_a_selector_over_the_limit_is_bad_input_naming_the_field() -> None:
    with pytest.raises(InputError) as err:
        _claim_with(NESTED_3)
    text = str(err.value)
    assert "ResourceClaimTemplate default/single-gpu" in text, text
    assert "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression" in text, text
    assert (
        "Forbidden: too complex, exceeds cost limit (estimated worst case 9,141,411; the limit is 1,000,000)"
        in text
    )


def test_a_selector_that_is_not_bool_is_bad_input() -> None:
    with pytest.raises(InputError) as err:
        _claim_with("device.attributes['gpu.nvidia.com'].index + 1")
    assert str(err.value).endswith(
        "selectors[0].cel.expression: Invalid value: \"device.attributes['gpu.nvidia.com'].index + 1\": "
        "must evaluate to bool or the unknown type, not int"
    ), str(err.value)
    # an attribute's value is the unknown type: taken, and evaluated on each device
    assert _claim_with("device.attributes['gpu.nvidia.com'].productName")["p"].phase != SCHEDULED


def test_a_device_class_selector_over_the_limit_is_bad_input() -> None:
    with pytest.raises(InputError) as err:
        run(
            [
                *nodes("n1"),
                gpu_class(expr=f"device.driver == 'gpu.nvidia.com' && {NESTED_3}"),
                gpu_slice("n1", 1),
                template(),
            ],
            [claim_pod("p")],
        )
    assert "DeviceClass gpu.nvidia.com" in str(err.value) and "exceeds cost limit" in str(err.value)


def test_a_selector_under_the_limit_is_evaluated() -> None:
    under = f"{LIST_100}.all(x, {LIST_100}.all(y, x + y >= 0))"
    assert estimate(under) == 71411
    assert _claim_with(under)["p"].phase == SCHEDULED


def test_simulate_refuses_it_at_once_exit_2(tmp_path: Path) -> None:
    cluster, work = tmp_path / "cluster.yaml", tmp_path / "work.yaml"
    cluster.write_text(
        yaml.safe_dump_all([*nodes("n1"), gpu_class(), gpu_slice("n1", 8), template(selectors=[NESTED_3])])
    )
    work.write_text(yaml.safe_dump_all([claim_pod("p")]))
    res = invoke(["simulate", "-c", str(cluster), "-w", str(work)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.stderr
    assert "selectors[0].cel.expression" in res.stderr and "too complex, exceeds cost limit" in res.stderr


def test_simulate_stays_interruptible_on_selectors_at_the_limit(tmp_path: Path) -> None:
    """Every evaluation is bounded by the limit (about 30 ms at 1,000,000): Ctrl-C is honoured between them
    even when thousands of distinct devices each need one."""
    near = "[" + ", ".join(str(i) for i in range(45)) + "]"
    # true for every device until the last test, which none passes: each distinct device is evaluated
    selector = (
        f"{near}.all(x, {near}.all(y, {near}.all(z, x + y + z >= 0))) && "
        "device.attributes['gpu.nvidia.com'].index < 0"
    )
    assert 700_000 < estimate(selector) <= MAX_COST
    names = [f"n{i}" for i in range(300)]
    items: list[Any] = [*nodes(*names), gpu_class(), template(selectors=[selector])]
    items += [gpu_slice(n, devices=[gpu_device(i, n) for i in range(8)]) for n in names]
    cluster, work = tmp_path / "cluster.json", tmp_path / "work.yaml"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    work.write_text(yaml.safe_dump_all([claim_pod("p")]))
    cmd = launched(
        [sys.executable, "-m", "kgpu.cli.main", "simulate", "-c", str(cluster), "-w", str(work)],
        default_signals=True,
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(4)
        assert proc.poll() is None, "simulate ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err


FUZZ_TOKENS = [
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ".",
    "'",
    '"',
    "\\",
    "?",
    ":",
    "!",
    "-",
    " in ",
    "has(",
    ".all(x, ",
    ".map(y, ",
    "cel.bind(z, 1, ",
    "1",
    "'a'",
    "device",
    "&&",
    "||",
    "==",
    "+",
    "*",
]


def test_fuzzed_selectors_are_estimated_or_refused_never_a_crash() -> None:
    """Seeded mutations of the recorded selectors (cut, doubled, tokens inserted): the estimate is a number or
    CelParseError, compiling is a Program or CelSyntaxError, and a selector both take evaluates to a result."""
    import random

    from kgpu.model.dra import Device
    from kgpu.sim.scheduler.plugins.cel import CelSyntaxError, Evaluator

    rng = random.Random(20261129)
    seeds = [r["expression"] for r in ORACLE if len(r["expression"]) < 400]
    ev = Evaluator()
    device = Device(
        name="gpu-0", attributes={"gpu.nvidia.com/index": 0}, capacity={"gpu.nvidia.com/memory": 10**9}
    )
    tally = {"estimated": 0, "refused by the estimate": 0, "not compiled": 0, "evaluated": 0}
    for _ in range(600):
        e = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            i, j = sorted(rng.randrange(len(e) + 1) for _ in range(2))
            op = rng.random()
            e = (
                e[:i] + e[j:]
                if op < 0.3
                else e[:i] + e[i:j] * 2 + e[j:]
                if op < 0.5
                else e[:i] + rng.choice(FUZZ_TOKENS) + e[i:]
            )
        try:
            cost = estimate(e)
            tally["estimated"] += 1
        except CelParseError:
            tally["refused by the estimate"] += 1
            cost = None
        try:
            p = ev.program(e)
        except CelSyntaxError:
            tally["not compiled"] += 1
            continue
        assert cost is not None and p.cost == cost
        if cost <= MAX_COST:
            out = ev.evaluate(p, "gpu.nvidia.com", device)
            assert isinstance(out, (bool, Exception))
            tally["evaluated"] += 1
    print(tally)
    assert tally["evaluated"] >= 30 and tally["not compiled"] >= 100, tally
