"""TKE super-node GPU spec matching against the guide's (seed 003) examples and error table."""

from __future__ import annotations

import pytest

from kgpu.catalog.tke import (
    INVALID_ANNOTATION,
    INVALID_MEMORY_FORMAT,
    NO_MATCHING_SPEC,
    UNSUPPORTED_GPU_TYPE,
    TkeMatchError,
    match_auto,
    match_explicit,
    tke_gpu_types,
)
from kgpu.sim.provisioners.tke.spec import TkeMatch, match_pod_spec

GIB = 1024**3
P = "eks.tke.cloud.tencent.com/"


def auto(
    gpu_type: str, *, req: tuple[float, int, int], lim: tuple[float, int, int] | None = None
) -> TkeMatch:
    """A pod in auto mode: (cores, GiB, GPUs) requests and limits."""

    def parsed(t: tuple[float, int, int]) -> dict[str, int]:
        return {"cpu": int(t[0] * 1000), "memory": t[1] * GIB, "nvidia.com/gpu": t[2]}

    return match_pod_spec({P + "gpu-type": gpu_type}, parsed(req), parsed(lim) if lim else {})


def explicit(gpu_type: str, count: str, cpu: str, mem: str, gpus: int = 1) -> TkeMatch:
    annotations = {P + "gpu-type": gpu_type, P + "gpu-count": count, P + "cpu": cpu, P + "mem": mem}
    return match_pod_spec(annotations, {"nvidia.com/gpu": gpus}, {"nvidia.com/gpu": gpus})


def spec(m: TkeMatch) -> tuple[str, int, int, str, str]:
    return (m.gpu_type, m.gpu_count, m.cpu, m.memory, m.mode)


# --- the guide's YAML examples 1-8 --------------------------------------------------------------------


def test_example_1_v100_auto():
    """最终分配: V100 1卡, 8核/40GiB  (requests 6/30Gi, limits 8/40Gi: the larger of each)."""
    assert spec(auto("V100", req=(6, 30, 1), lim=(8, 40, 1))) == ("V100", 1, 8, "40Gi", "auto")


def test_example_2_quarter_t4_auto():
    """最终分配: 1/4 T4, 4核/16GiB"""
    assert spec(auto("1/4*T4", req=(2, 8, 1), lim=(4, 16, 1))) == ("1/4*T4", 1, 4, "16Gi", "auto")


def test_example_2b_half_t4_auto():
    """最终分配: 1/2 T4, 8核/32GiB"""
    assert spec(auto("1/2*T4", req=(4, 16, 1), lim=(8, 32, 1))) == ("1/2*T4", 1, 8, "32Gi", "auto")


def test_example_3_t4_two_cards_is_not_in_the_table():
    """最终分配: T4 2卡, 40核/160GiB（精确匹配）

    The T4 table has no 2-card row, and the tables are the spec (docs/tke.md): no matching spec.
    """
    with pytest.raises(TkeMatchError) as err:
        explicit("T4", "2", "40", "160Gi", gpus=2)
    assert err.value.code == NO_MATCHING_SPEC
    assert "No matching instance type" in err.value.message
    assert "T4 has no 2-GPU spec" in err.value.message


def test_example_4_priority_list_prefers_t4():
    """系统会优先尝试 T4 规格，不可用时尝试 V100: T4 holds 8 cores/32GiB, so T4 1卡 8核/32GiB."""
    assert spec(auto("T4,V100", req=(4, 16, 1), lim=(8, 32, 1))) == ("T4", 1, 8, "32Gi", "auto")


def test_example_5_gpu_only_gets_the_smallest_spec():
    """Example 5 states no final spec; only nvidia.com/gpu: 1 is set, so the smallest A10*GNV4 1-card spec."""
    assert spec(auto("A10*GNV4", req=(0, 0, 1), lim=(0, 0, 1))) == ("A10*GNV4", 1, 2, "2Gi", "auto")


def test_example_6_pnv5b_is_not_an_annotation_value():
    """最终分配: PNV5b 1卡, 48核/192GiB（精确匹配）

    The annotation table gives 'L20' as the value for NVIDIA PNV5b; 'PNV5b' is rejected with that hint.
    """
    with pytest.raises(TkeMatchError) as err:
        explicit("PNV5b", "1", "48", "192Gi")
    assert err.value.code == UNSUPPORTED_GPU_TYPE
    assert "'L20'" in err.value.message
    assert spec(explicit("L20", "1", "48", "192Gi")) == ("L20", 1, 48, "192Gi", "explicit")


def test_example_7_a10_pnv4_four_cards_explicit():
    """最终分配: A10 PNV4 4卡, 112核/466GiB（精确匹配）"""
    assert spec(explicit("A10*PNV4", "4", "112", "466Gi", gpus=4)) == (
        "A10*PNV4",
        4,
        112,
        "466Gi",
        "explicit",
    )


def test_example_8_v100_smallest_explicit():
    """最终分配: V100 1卡, 2核/2GiB（最小配置，节省成本）"""
    assert spec(explicit("V100", "1", "2", "2Gi")) == ("V100", 1, 2, "2Gi", "explicit")


# --- 方式 B worked examples and scenarios -----------------------------------------------------------


def test_match_example_2_memory_rounds_to_whole_gib():
    """Seed: '请求 10核/50GiB，1张 T4 … 最终分配: 16核/64GiB'.

    The T4 1-card memory range is 2-128GiB at whole GiB, so 50GiB stays 50GiB (the guide's 64 contradicts
    its example 1, where 40GiB stays 40GiB); the cores round up to 16.
    """
    assert spec(auto("T4", req=(10, 50, 1))) == ("T4", 1, 16, "50Gi", "auto")


def test_match_example_3_rounds_up_to_more_gpus():
    """Seed: '请求 100核/400GiB，2张 A10 PNV4 … 后台会选择 A10 PNV4 4卡 或返回错误': we choose 4 cards."""
    assert spec(auto("A10*PNV4", req=(100, 400, 2))) == ("A10*PNV4", 4, 112, "400Gi", "auto")


def test_scenario_3_v100_two_cards():
    """系统自动匹配: V100 2卡，18核/80GiB"""
    assert spec(auto("V100", req=(16, 64, 2), lim=(18, 80, 2))) == ("V100", 2, 18, "80Gi", "auto")


def test_fractional_request_rounds_up():
    """5.5 cores -> 8 (V100 1 card offers 2, 4, 8); 30.2GiB -> 31GiB."""
    m = match_pod_spec(
        {P + "gpu-type": "V100"}, {"cpu": 5500, "memory": int(30.2 * GIB), "nvidia.com/gpu": 1}, {}
    )
    assert (m.cpu, m.memory) == (8, "31Gi")


def test_memory_below_range_is_raised_to_the_minimum():
    """V100 4-card memory starts at 32GiB."""
    assert auto("V100", req=(32, 8, 4)).memory == "32Gi"


def test_smallest_prefers_fewer_gpus_then_fewer_cores():
    """1 GPU, 8 cores fits V100's 1-card row (8 cores) before its 2-card row."""
    assert spec(auto("V100", req=(8, 40, 1))) == ("V100", 1, 8, "40Gi", "auto")
    assert spec(auto("V100", req=(10, 40, 1))) == ("V100", 2, 16, "40Gi", "auto")


def test_priority_list_falls_back_when_first_type_cannot_hold_it():
    """'T4,V100' with 8 GPUs: T4 has at most 4 cards, so V100 8卡."""
    assert spec(auto("T4,V100", req=(64, 256, 8))) == ("V100", 8, 64, "256Gi", "auto")


def test_priority_list_skips_type_without_specs():
    """L40 (PNV5i) has no spec table in the guide: it never matches, and the list moves on."""
    assert auto("L40,T4", req=(4, 16, 1)).gpu_type == "T4"
    with pytest.raises(TkeMatchError) as err:
        auto("L40", req=(4, 16, 1))
    assert err.value.code == NO_MATCHING_SPEC


def test_auto_nothing_fits():
    """T4 tops out at 4 cards / 80 cores / 320GiB."""
    with pytest.raises(TkeMatchError) as err:
        auto("T4", req=(100, 400, 4))
    assert err.value.code == NO_MATCHING_SPEC
    assert "T4 largest: 4 GPU(s), 80 cores, 320Gi" in err.value.message


def test_no_gpu_request_defaults_to_one():
    """gpu-count 默认值为 1."""
    assert match_pod_spec({P + "gpu-type": "T4"}, {}, {}).gpu_count == 1


# --- explicit-mode errors -----------------------------------------------------------------------------


def test_partial_explicit_annotations():
    """方式 A 和方式 B 不可混用: gpu-count alone is an annotation error naming what is missing."""
    with pytest.raises(TkeMatchError) as err:
        match_pod_spec({P + "gpu-type": "V100", P + "gpu-count": "1"}, {}, {})
    assert err.value.code == INVALID_ANNOTATION
    assert "InvalidParameter.Param" in err.value.message
    assert P + "cpu" in err.value.message and P + "mem" in err.value.message


@pytest.mark.parametrize("mem", ["40G", "40", "40.5Gi", "40GiB", "40960Mi"])
def test_memory_must_be_whole_gi(mem):
    """单位必须使用 Gi（不支持 G）: Invalid memory format."""
    with pytest.raises(TkeMatchError) as err:
        explicit("V100", "1", "8", mem)
    assert err.value.code == INVALID_MEMORY_FORMAT
    assert "Invalid memory format" in err.value.message


def test_cpu_not_in_options():
    """V100 1 card offers 2, 4, 8 cores: 6 is no spec."""
    with pytest.raises(TkeMatchError) as err:
        explicit("V100", "1", "6", "40Gi")
    assert err.value.code == NO_MATCHING_SPEC
    assert "offers 2, 4, 8 cores, not 6" in err.value.message


def test_memory_out_of_range():
    with pytest.raises(TkeMatchError) as err:
        explicit("V100", "1", "8", "41Gi")
    assert err.value.code == NO_MATCHING_SPEC
    assert "2-40Gi" in err.value.message


@pytest.mark.parametrize("cpu", ["8.5", "8000m", "0", "eight"])
def test_cpu_annotation_must_be_whole_cores(cpu):
    with pytest.raises(TkeMatchError) as err:
        explicit("V100", "1", cpu, "40Gi")
    assert err.value.code == INVALID_ANNOTATION


def test_unknown_gpu_type():
    with pytest.raises(TkeMatchError) as err:
        explicit("A100", "1", "8", "40Gi")
    assert err.value.code == UNSUPPORTED_GPU_TYPE
    assert "FailedScheduling: 0/1 nodes are available" in err.value.message


def test_missing_or_empty_gpu_type():
    with pytest.raises(TkeMatchError) as err:
        match_pod_spec({}, {"nvidia.com/gpu": 1}, {})
    assert err.value.code == INVALID_ANNOTATION
    with pytest.raises(TkeMatchError) as err:
        match_pod_spec({P + "gpu-type": "T4,"}, {}, {})
    assert err.value.code == INVALID_ANNOTATION


def test_explicit_priority_list_takes_first_type_with_the_spec():
    """T4 1 card has no 36-core option; V100 4 cards does."""
    assert match_explicit(["T4", "V100"], 4, 36, 160).gpu_type == "V100"


# --- data -----------------------------------------------------------------------------------------


def test_spec_table_matches_the_guide():
    """Spot checks of the transcription, and the CUDA versions of the annotation table."""
    types = tke_gpu_types()
    assert list(types)[:4] == ["V100", "T4", "1/4*T4", "1/2*T4"]
    v100_8 = next(r for r in types["V100"].specs if r.gpus == 8)
    assert (v100_8.cpu_options, v100_8.memory_min_gib, v100_8.memory_max_gib) == ((64, 72), 64, 320)
    assert types["1/4*T4"].cuda == "11.0" and types["L20"].cuda == "12.7"
    assert types["L40"].specs == ()


def test_as_dict_shape():
    assert match_auto(["T4"], 1, 8000, 32 * GIB).gpu_type == "T4"
    assert auto("T4", req=(8, 32, 1)).as_dict() == {
        "gpu_type": "T4",
        "gpu_count": 1,
        "cpu": 8,
        "memory": "32Gi",
        "mode": "auto",
    }
