"""Every cost figure of `kgpu plan` names its source (AWS list prices and their date, a TKE pool's own
prices, static nodes' hourlyPrice, a catalog override, or none), and spot against on-demand is shown only
where some pool can buy spot."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from kgpu.catalog.prices import AS_OF, caption
from kgpu.cli.main import cli
from kgpu.cli.plan_cmd import _spot_line
from kgpu.model.profile import builtin_profile
from kgpu.sim.cost import pool_can_be_spot, spot_possible
from test_json_schemas import validate

TKE_PRICES = {
    "date": "2026-11-20",
    "source": "console price calculator, ap-guangzhou",
    "cpuCoreHour": 0.02,
    "memoryGiBHour": 0.005,
    "gpuHour": {"T4": 0.60, "1/4*T4": 0.15, "1/2*T4": 0.30, "V100": 1.50},
}


def init(tmp_path: Path, template: str, edit: Any = None) -> Path:
    path = tmp_path / "kgpu.yaml"
    res = CliRunner().invoke(cli, ["init", "-t", template, "-f", str(path)])
    assert res.exit_code == 0, res.output
    if edit is not None:
        data = yaml.safe_load(path.read_text())
        edit(data)
        path.write_text(yaml.safe_dump(data))
    return path


def plan(*args: str) -> str:
    res = CliRunner().invoke(cli, ["plan", "--color", "never", *args])
    assert res.exit_code in (0, 1), res.output
    return res.stdout


def cost_block(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index("Cost")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("  (USD per hour; month = 730 h)"))
    return lines[start : end + 1]


def prices(block: list[str]) -> list[str]:
    return [ln.strip() for ln in block if ln.startswith("  prices: ")]


def plan_json(*args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(plan(*args, "-o", "json"))
    validate("plan", data)
    return data


AWS = f"prices: AWS us-west-2 list prices as of {AS_OF}"
SPOT_NOTE = "(spot: the median over the region's zones that day, spot prices change hourly)"

EXPECTED = {
    "eks-karpenter": [f"{AWS} for pool gpu {SPOT_NOTE}"],
    "eks-eksctl": [f"{AWS} for pools spot-ng, gpu-spot-ng {SPOT_NOTE}"],
    "kuberay": [f"{AWS} for pools cpu-node-group, gpu-node-group"],
    "onprem": ["prices: none for pool gpu: 2 on-prem node(s) without hourlyPrice"],
    "tke-supernode": [
        "prices: none for pool supernode: kgpu packages no TKE super node prices; give the pool's prices "
        "(docs/tke.md)"
    ],
}


@pytest.mark.parametrize("template", sorted(EXPECTED))
def test_each_template_names_its_price_sources(tmp_path: Path, template: str):
    path = init(tmp_path, template)
    out = plan("-f", str(path))
    block = cost_block(out)
    assert prices(block) == EXPECTED[template], "\n".join(block)
    assert "spot saves $0.0000/h" not in out
    spot = [ln for ln in block if "spot saves" in ln]
    data = plan_json("-f", str(path))
    kinds = [s["kind"] for s in data["cost"]["price_sources"]]
    if template in ("eks-karpenter", "eks-eksctl"):
        assert len(spot) == 1 and data["cost"]["spot_possible"] is True
        assert spot[0].strip().startswith("spot $") and "all on-demand $" in spot[0]
        assert data["cost"]["savings"] > 0
        assert kinds == ["aws-list"]
    else:  # no pool can buy spot: no spot line at all, and no AWS caption for non-AWS prices
        assert not spot and " spot " not in "\n".join(block)
        assert data["cost"]["spot_possible"] is False
    if template in ("onprem", "tke-supernode"):
        assert "AWS" not in out and caption() not in out and "prices as of" not in out
        assert kinds == ["none"]
        assert data["cost"]["price_sources"][0]["pools"] == [builtin_profile(template).pools[0].name]
    if template == "kuberay":
        assert kinds == ["aws-list"] and data["cost"]["price_sources"][0]["region"] == "us-west-2"
        assert "baseline nodes   $" in "\n".join(block)


def test_tke_prices_given_in_the_profile(tmp_path: Path):
    def priced(data: dict[str, Any]) -> None:
        data["pools"][0]["prices"] = TKE_PRICES

    path = init(tmp_path, "tke-supernode", priced)
    block = cost_block(plan("-f", str(path)))
    assert prices(block) == [
        "prices: TKE super node prices as given in the profile for pool supernode "
        "(read 2026-11-20, console price calculator, ap-guangzhou)",
        "prices: none for pool supernode: 3 super-node pod(s) of GPU types its gpuHour leaves out "
        "(A10*GNV4, A10*PNV4)",
    ]
    assert not any("spot" in ln for ln in block)
    data = plan_json("-f", str(path))
    given, missing = data["cost"]["price_sources"]
    assert given["kind"] == "tke-profile" and given["as_of"] == "2026-11-20" and given["pools"] == ["supernode"]
    assert missing["kind"] == "none" and missing["nodes"] == 3 == data["cost"]["unpriced_nodes"]
    assert data["cost"]["total"] > 0 and data["cost"]["spot_possible"] is False


def test_onprem_hourly_price_as_given(tmp_path: Path):
    def one_priced(data: dict[str, Any]) -> None:
        data["pools"][0]["nodes"][0]["hourlyPrice"] = 1.25

    path = init(tmp_path, "onprem", one_priced)
    block = cost_block(plan("-f", str(path)))
    assert prices(block) == [
        "prices: on-prem node prices as given in the profile for pool gpu (hourlyPrice of 1 node(s))",
        "prices: none for pool gpu: 1 on-prem node(s) without hourlyPrice",
    ]
    assert "  baseline nodes   $1.2500/h" in "\n".join(block)
    assert "  unpriced nodes   1 of the profile's own node(s) without a price: not in the totals" in block


def test_catalog_override_names_its_file(tmp_path: Path):
    path = init(tmp_path, "eks-karpenter")
    both = tmp_path / "both.csv"
    both.write_text(
        "instance_type,region,ondemand_usd_per_hour,spot_usd_per_hour_median\ng4dn.12xlarge,us-west-2,3.5,1.0\n"
    )
    block = cost_block(plan("-f", str(path), "--catalog", str(both)))
    assert prices(block) == [f"prices: catalog override from {both} for g4dn.12xlarge in pool gpu"]
    assert "    spot $1.0000/h, on-demand $0.0000/h; all on-demand $3.5000/h (spot saves $2.5000/h)" in block

    on_demand = tmp_path / "od.csv"
    on_demand.write_text("instance_type,region,ondemand_usd_per_hour\ng4dn.12xlarge,us-west-2,3.5\n")
    block = cost_block(plan("-f", str(path), "--catalog", str(on_demand)))
    assert prices(block) == [
        f"{AWS} for pool gpu {SPOT_NOTE}",
        f"prices: catalog override from {on_demand} for the on-demand price of g4dn.12xlarge (all on-demand) "
        "in pool gpu",
    ]

    unused = tmp_path / "unused.csv"
    unused.write_text("instance_type,region,ondemand_usd_per_hour\nm5.large,us-west-2,0.09\n")
    data = plan_json("-f", str(path), "--catalog", str(unused))
    over = data["cost"]["price_sources"][-1]
    assert over["kind"] == "catalog-override" and over["pools"] == [] and over["files"] == [str(unused)]
    assert over["text"].endswith("no node in the plan is of its types (m5.large)")


def test_catalog_override_in_the_profile(tmp_path: Path):
    rows = [{"instance_type": "g4dn.12xlarge", "region": "us-west-2", "spot_usd_per_hour_median": 1.0}]

    def inline(data: dict[str, Any]) -> None:
        data["catalog"] = {"instanceTypes": rows}

    block = cost_block(plan("-f", str(init(tmp_path, "eks-karpenter", inline))))
    assert prices(block) == [
        "prices: catalog override from the profile's catalog.instanceTypes for g4dn.12xlarge in pool gpu"
    ]
    (tmp_path / "rows.yaml").write_text(yaml.safe_dump(rows))

    def from_file(data: dict[str, Any]) -> None:
        data["catalog"] = {"file": "rows.yaml"}

    (tmp_path / "kgpu.yaml").unlink()
    block = cost_block(plan("-f", str(init(tmp_path, "eks-karpenter", from_file))))
    assert prices(block) == ["prices: catalog override from rows.yaml for g4dn.12xlarge in pool gpu"]


def test_price_sources_schema_rejects_wrong_shapes(tmp_path: Path):
    data = plan_json("-f", str(init(tmp_path, "eks-karpenter")))
    entry = data["cost"]["price_sources"][0]
    for broken in (
        {**entry, "kind": "guess"},
        {k: v for k, v in entry.items() if k != "region"},  # AWS prices without their region
        {k: v for k, v in entry.items() if k != "text"},
        {**entry, "as_of": "21 Nov 2026"},
        {**entry, "currency": "CNY"},
        {**entry, "colour": "red"},
    ):
        bad = copy.deepcopy(data)
        bad["cost"]["price_sources"][0] = broken
        with pytest.raises(jsonschema.ValidationError):
            validate("plan", bad)
    bad = copy.deepcopy(data)
    del bad["cost"]["spot_possible"]
    with pytest.raises(jsonschema.ValidationError):
        validate("plan", bad)


def test_report_prints_the_sources_and_leaves_spot_out_where_it_means_nothing(tmp_path: Path):
    tke = tmp_path / "tke.html"
    plan("-f", str(init(tmp_path, "tke-supernode")), "--report", str(tke))
    html = tke.read_text()
    assert "prices: none for pool supernode: kgpu packages no TKE super node prices" in html
    assert "of which spot" not in html and "prices as of" not in html
    (tmp_path / "kgpu.yaml").unlink()
    eks = tmp_path / "eks.html"
    plan("-f", str(init(tmp_path, "eks-karpenter")), "--report", str(eks))
    html = eks.read_text()
    assert f"AWS us-west-2 list prices as of {AS_OF} for pool gpu" in html and "of which spot" in html


def test_spot_line_says_nothing_meaningless():
    assert _spot_line({"spot_possible": False, "total": 2.0, "on_demand": 2.0}) == []
    assert _spot_line({"spot_possible": True, "total": 0.0}) == []  # no new node priced
    assert _spot_line({"spot_possible": True, "total": 2.0, "spot": 0.0, "on_demand": 2.0, "savings": 0.0}) == [
        "    on-demand $2.0000/h; no new node is spot"
    ]
    same = {"spot_possible": True, "total": 1.0, "spot": 1.0, "on_demand": 0.0, "all_on_demand": 1.0, "savings": 0.0}
    assert _spot_line(same) == [
        "    spot $1.0000/h, on-demand $0.0000/h; all on-demand $1.0000/h (spot saves nothing at these prices)"
    ]


def test_which_pools_can_buy_spot():
    karpenter = builtin_profile("eks-karpenter")
    assert all(pool_can_be_spot(p) for p in karpenter.pools) and spot_possible(karpenter, [])
    on_demand = karpenter.pools[1].model_copy(update={"capacity_types": ["on-demand"]})
    assert not pool_can_be_spot(on_demand)
    assert pool_can_be_spot(builtin_profile("eks-eksctl").pools[1])
    for template in ("kuberay", "onprem", "tke-supernode"):
        prof = builtin_profile(template)
        assert not any(pool_can_be_spot(p) for p in prof.pools) and not spot_possible(prof, [])
