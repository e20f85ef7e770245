"""GPM activity (SM, occupancy, tensor) over the fake NVML: values, units, sample lifetime, support, failures."""

from __future__ import annotations

import importlib

import pytest

from fakes.fake_nvml import FakeGpu, FakeMig, FakeNvml, make_gpus
from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.gpm import GPM_METRICS, GpmSampler
from kgpu.exporter.nvml import Nvml, NvmlUnavailable
from test_exporter_collector import UUID, scrape, value

RAW_UUID = "GPU-5D1B2D6E-0000-4A5B-8C9D-000000000000"  # FakeGpu's default
GPU_FAMILIES = (
    "nvidia_smi_sm_activity_ratio",
    "nvidia_smi_sm_occupancy_ratio",
    "nvidia_smi_tensor_activity_ratio",
)
MIG_FAMILIES = ("nvidia_smi_mig_sm_activity_ratio", "nvidia_smi_mig_tensor_activity_ratio")


def make(gpus: list[FakeGpu] | None = None, **options: object) -> tuple[FakeNvml, GpuCollector]:
    """A collector whose GPM clock is the fake's, which only the test moves."""
    fake = FakeNvml(gpus)
    fake.advance_gpm(0.0)  # stop following the wall clock
    collector = GpuCollector(Nvml(fake), options=CollectorOptions(**options), hostname="gpu-node-1")  # type: ignore[arg-type]
    assert collector.gpm is not None
    collector.gpm.clock = fake.gpm_now
    return fake, collector


def mig_gpu() -> FakeGpu:
    return FakeGpu(
        mig_mode=(1, 1),
        migs=[
            FakeMig("MIG-aaaa", 1, 0, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 10 * 2**30, 2 * 2**30),
            # one GPU instance split in two compute instances: one set of GPM series for the instance
            FakeMig("MIG-bbbb", 2, 0, "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb", 40 * 2**30, 5 * 2**30),
            FakeMig("MIG-cccc", 2, 1, "NVIDIA H100 80GB HBM3 MIG 2c.3g.40gb", 40 * 2**30, 5 * 2**30),
        ],
    )


def test_first_collection_takes_the_baseline_then_activity_between_collections() -> None:
    """No series on the first collection; then each metric is the average since the previous one, as a ratio."""
    fake, collector = make()
    fake.set_gpm_activity(RAW_UUID, sm=0.75, occupancy=0.4, tensor=0.5)
    s = scrape(collector)
    assert not [n for n in s if n in GPU_FAMILIES]
    assert fake.calls["nvmlGpmSampleGet"] == 1 and fake.calls["nvmlGpmMetricsGet"] == 0

    fake.advance_gpm(10.0)
    s = scrape(collector)
    assert value(s, "nvidia_smi_sm_activity_ratio") == pytest.approx(0.75)  # NVML's 75 %
    assert value(s, "nvidia_smi_sm_occupancy_ratio") == pytest.approx(0.4)
    assert value(s, "nvidia_smi_tensor_activity_ratio") == pytest.approx(0.5)
    assert len(s["nvidia_smi_sm_activity_ratio"]) == 1

    # the next interval only: 0.8 for 1 s then 0.2 for 1 s averages to 0.5
    fake.set_gpm_activity(RAW_UUID, sm=0.8)
    fake.advance_gpm(1.0)
    fake.set_gpm_activity(RAW_UUID, sm=0.2)
    fake.advance_gpm(1.0)
    s = scrape(collector)
    assert value(s, "nvidia_smi_sm_activity_ratio") == pytest.approx(0.5)
    assert value(s, "nvidia_smi_tensor_activity_ratio") == pytest.approx(0.0)
    # steady state: one sample and one metrics computation per GPU and collection, buffers allocated once
    assert fake.calls["nvmlGpmSampleGet"] == 3 and fake.calls["nvmlGpmMetricsGet"] == 2
    assert fake.calls["nvmlGpmSampleAlloc"] == 2 and fake.calls["nvmlGpmQueryDeviceSupport"] == 1


def test_collections_closer_than_the_minimum_interval_reuse_the_last_values() -> None:
    """A collection within 100 ms of the last sample takes none; the next interval spans from that sample."""
    fake, collector = make()
    fake.set_gpm_activity(RAW_UUID, sm=0.6)
    scrape(collector)
    fake.advance_gpm(1.0)
    assert value(scrape(collector), "nvidia_smi_sm_activity_ratio") == pytest.approx(0.6)

    fake.set_gpm_activity(RAW_UUID, sm=0.1)
    fake.advance_gpm(0.05)
    assert value(scrape(collector), "nvidia_smi_sm_activity_ratio") == pytest.approx(0.6)
    assert fake.calls["nvmlGpmSampleGet"] == 2, "no sample within the minimum interval"

    fake.advance_gpm(0.95)
    assert value(scrape(collector), "nvidia_smi_sm_activity_ratio") == pytest.approx(0.1)
    assert fake.calls["nvmlGpmSampleGet"] == 3


def test_values_are_clamped_to_ratios() -> None:
    fake, collector = make()
    fake.set_gpm_activity(RAW_UUID, sm=1.02)  # counters a little ahead of the clock
    scrape(collector)
    fake.advance_gpm(1.0)
    assert value(scrape(collector), "nvidia_smi_sm_activity_ratio") == 1.0


def test_a_metric_the_gpu_cannot_compute_has_no_series() -> None:
    fake, collector = make()
    fake.gpm_unsupported_metrics.add(fake.NVML_GPM_METRIC_SM_OCCUPANCY)
    fake.set_gpm_activity(RAW_UUID, sm=0.3, tensor=0.2)
    scrape(collector)
    fake.advance_gpm(1.0)
    s = scrape(collector)
    assert "nvidia_smi_sm_occupancy_ratio" not in s
    assert value(s, "nvidia_smi_sm_activity_ratio") == pytest.approx(0.3)


def test_gpus_without_gpm_have_no_series_and_are_not_asked_again() -> None:
    """An A100 (no GPM) and a GPU whose support query is NotSupported: no series, one query each per init."""
    gpus = make_gpus(3)
    gpus[0].compute_capability = (8, 0)
    gpus[1].unsupported = {"nvmlGpmQueryDeviceSupport"}
    fake, collector = make(gpus)
    for gpu in gpus:
        fake.set_gpm_activity(gpu.uuid, sm=0.5)
    for _ in range(3):
        s = scrape(collector)
        fake.advance_gpm(1.0)
    assert {dict(k)["uuid"] for k in s["nvidia_smi_sm_activity_ratio"]} == {
        gpus[2].uuid.lower().removeprefix("gpu-")
    }
    assert fake.calls["nvmlGpmQueryDeviceSupport"] == 3, "once per GPU, not per scrape"
    assert fake.calls["nvmlGpmSampleAlloc"] == 2, "buffers only for the GPU with GPM"
    assert fake.calls["nvmlGpmSampleGet"] == 3
    assert s["nvidia_smi_last_collect_success"][()] == 1


def test_sample_not_supported_stops_sampling_that_gpu() -> None:
    fake, collector = make([FakeGpu(unsupported={"nvmlGpmSampleGet"})])
    for _ in range(3):
        assert "nvidia_smi_sm_activity_ratio" not in scrape(collector)
        fake.advance_gpm(1.0)
    assert fake.calls["nvmlGpmSampleGet"] == 1
    assert not fake.gpm_live, "its buffers are freed"


def test_a_passing_error_costs_one_interval_only() -> None:
    """Any other non-fatal error: no series this time, the earlier sample stays the baseline."""

    class Flaky(FakeNvml):
        fail = False

        def nvmlGpmSampleGet(self, h, sample):  # type: ignore[no-untyped-def]
            if self.fail:
                raise self.NVMLError_Unknown(999)
            return super().nvmlGpmSampleGet(h, sample)

    fake = Flaky()
    fake.advance_gpm(0.0)
    collector = GpuCollector(Nvml(fake), hostname="h")
    assert collector.gpm is not None
    collector.gpm.clock = fake.gpm_now
    fake.set_gpm_activity(RAW_UUID, sm=0.4)
    scrape(collector)
    fake.advance_gpm(1.0)
    fake.fail = True
    s = scrape(collector)
    assert "nvidia_smi_sm_activity_ratio" not in s
    assert s["nvidia_smi_last_collect_success"][()] == 1
    fake.fail = False
    fake.set_gpm_activity(RAW_UUID, sm=1.0)
    fake.advance_gpm(1.0)
    # from the first sample: 0.4 for 1 s, 1.0 for 1 s
    assert value(scrape(collector), "nvidia_smi_sm_activity_ratio") == pytest.approx(0.7)


def test_mig_instance_activity_joins_mig_info() -> None:
    """Per GPU instance, labelled uuid and gpu_instance_id as nvidia_smi_mig_info, once per instance."""
    fake, collector = make([mig_gpu()])
    fake.set_gpm_activity(RAW_UUID, 1, sm=0.25, occupancy=0.1, tensor=0.125)
    fake.set_gpm_activity(RAW_UUID, 2, sm=0.9, occupancy=0.6, tensor=0.7)
    fake.set_gpm_activity(RAW_UUID, sm=0.5)
    s = scrape(collector)
    assert not [n for n in s if n.endswith("activity_ratio")]
    fake.advance_gpm(2.0)
    s = scrape(collector)
    assert value(s, "nvidia_smi_mig_sm_activity_ratio", gpu_instance_id="1") == pytest.approx(0.25)
    assert value(s, "nvidia_smi_mig_tensor_activity_ratio", gpu_instance_id="1") == pytest.approx(0.125)
    assert value(s, "nvidia_smi_mig_sm_activity_ratio", gpu_instance_id="2") == pytest.approx(0.9)
    assert value(s, "nvidia_smi_mig_tensor_activity_ratio", gpu_instance_id="2") == pytest.approx(0.7)
    assert value(s, "nvidia_smi_mig_sm_occupancy_ratio", gpu_instance_id="2") == pytest.approx(0.6)
    assert value(s, "nvidia_smi_sm_activity_ratio") == pytest.approx(0.5)  # the whole GPU, when NVML has it
    for family in MIG_FAMILIES:
        assert len(s[family]) == 2
        # the dashboard's join: on(uuid, gpu_instance_id) with nvidia_smi_mig_info
        joinable = {(dict(k)["uuid"], dict(k)["gpu_instance_id"]) for k in s["nvidia_smi_mig_info"]}
        assert {tuple(sorted(dict(k).items())) for k in s[family]} == {
            (("gpu_instance_id", gi), ("uuid", uuid)) for uuid, gi in joinable
        }
    assert fake.calls["nvmlGpmMigSampleGet"] == 4


def test_mig_instances_sampled_without_the_whole_gpu() -> None:
    """A driver that samples only GPU instances in MIG mode: the whole GPU is not asked again, instances are."""
    gpu = mig_gpu()
    gpu.unsupported = {"nvmlGpmSampleGet"}
    fake, collector = make([gpu])
    fake.set_gpm_activity(RAW_UUID, 1, sm=0.5)
    for _ in range(3):
        s = scrape(collector)
        fake.advance_gpm(1.0)
    assert "nvidia_smi_sm_activity_ratio" not in s
    assert value(s, "nvidia_smi_mig_sm_activity_ratio", gpu_instance_id="1") == pytest.approx(0.5)
    assert fake.calls["nvmlGpmSampleGet"] == 1


def test_destroyed_gpu_instance_frees_its_samples_and_a_new_one_starts_over() -> None:
    gpu = mig_gpu()
    fake, collector = make([gpu])
    scrape(collector)
    fake.advance_gpm(1.0)
    scrape(collector)
    assert len(fake.gpm_live) == 6  # two buffers each: the GPU, instances 1 and 2

    removed = [m for m in gpu.migs if m.gpu_instance_id == 2]
    gpu.migs = [m for m in gpu.migs if m.gpu_instance_id != 2]
    fake.advance_gpm(1.0)
    s = scrape(collector)
    assert len(fake.gpm_live) == 4 and len(fake.gpm_freed) == 2
    assert {dict(k)["gpu_instance_id"] for k in s["nvidia_smi_mig_sm_activity_ratio"]} == {"1"}

    gpu.migs += removed  # created again: a new baseline first
    fake.advance_gpm(1.0)
    s = scrape(collector)
    assert {dict(k)["gpu_instance_id"] for k in s["nvidia_smi_mig_sm_activity_ratio"]} == {"1"}
    fake.advance_gpm(1.0)
    s = scrape(collector)
    assert {dict(k)["gpu_instance_id"] for k in s["nvidia_smi_mig_sm_activity_ratio"]} == {"1", "2"}


def test_no_mig_option_samples_no_instances() -> None:
    fake, collector = make([mig_gpu()], mig=False)
    scrape(collector)
    fake.advance_gpm(1.0)
    s = scrape(collector)
    assert "nvidia_smi_mig_sm_activity_ratio" not in s
    assert fake.calls["nvmlGpmMigSampleGet"] == 0


def test_samples_freed_on_reinit_after_a_lost_gpu() -> None:
    """GpuIsLost: the collection fails; after re-init the old buffers are freed and sampling starts over."""
    fake, collector = make()
    fake.set_gpm_activity(RAW_UUID, sm=0.5)
    scrape(collector)
    fake.advance_gpm(1.0)
    assert value(scrape(collector), "nvidia_smi_sm_activity_ratio") == pytest.approx(0.5)
    old = set(fake.gpm_live)
    assert len(old) == 2

    fake.gpus[0].lost = True
    fake.advance_gpm(1.0)
    s = scrape(collector)
    assert s["nvidia_smi_last_collect_success"][()] == 0
    assert "nvidia_smi_sm_activity_ratio" not in s

    fake.gpus[0].lost = False
    fake.advance_gpm(1.0)
    s = scrape(collector)
    assert fake.init_calls == 2
    assert s["nvidia_smi_last_collect_success"][()] == 1
    assert fake.gpm_freed == old, "the previous generation's buffers are freed"
    assert fake.gpm_stale_frees == [], "and freed before NVML was shut down, not after the re-init"
    assert len(fake.gpm_live) == 2 and not old & set(fake.gpm_live)
    assert "nvidia_smi_sm_activity_ratio" not in s, "a new baseline after re-init"
    assert fake.calls["nvmlGpmQueryDeviceSupport"] == 2, "support is asked again after re-init"
    fake.advance_gpm(1.0)
    assert value(scrape(collector), "nvidia_smi_sm_activity_ratio") == pytest.approx(0.5)


def test_gpu_lost_during_gpm_sampling_fails_the_collection() -> None:
    """A fatal error from a GPM call is NVML's NvmlUnavailable like any other: failure, then re-init."""

    class LostOnSample(FakeNvml):
        def nvmlGpmSampleGet(self, h, sample):  # type: ignore[no-untyped-def]
            raise self.NVMLError_GpuIsLost(15)

    fake = LostOnSample()
    collector = GpuCollector(Nvml(fake), hostname="h")
    s = scrape(collector)
    assert s["nvidia_smi_last_collect_success"][()] == 0
    assert fake.shutdown_calls == 1
    nvml = Nvml(fake)
    with pytest.raises(NvmlUnavailable, match="GpuIsLost"):
        GpmSampler(nvml).read(nvml.handle(0), UUID)


def test_close_frees_samples_without_reinitialising() -> None:
    fake, collector = make([mig_gpu()])
    scrape(collector)
    assert len(fake.gpm_live) == 6
    collector.close()
    assert not fake.gpm_live
    collector.nvml.invalidate()
    collector.close()  # nothing left, and NVML is not initialised again for it
    assert fake.init_calls == 1


def test_gpm_off() -> None:
    fake, _ = make()
    collector = GpuCollector(Nvml(fake), options=CollectorOptions(gpm=False), hostname="h")
    scrape(collector)
    fake.advance_gpm(1.0)
    assert "nvidia_smi_sm_activity_ratio" not in scrape(collector)
    assert not [c for c in fake.calls if c.startswith("nvmlGpm")]


def test_dcgm_profiling_names() -> None:
    """--metrics dcgm: DCGM_FI_PROF_* as dcgm-exporter's ratios, labelled as its other series."""
    fake, collector = make(metrics="dcgm", pods=False)
    fake.set_gpm_activity(RAW_UUID, sm=0.75, occupancy=0.4, tensor=0.5)
    scrape(collector)
    fake.advance_gpm(1.0)
    s = scrape(collector)
    labels = (
        ("DCGM_FI_DRIVER_VERSION", "590.48.01"),
        ("Hostname", "gpu-node-1"),
        ("UUID", RAW_UUID),
        ("device", "nvidia0"),
        ("gpu", "0"),
        ("modelName", "NVIDIA H100 80GB HBM3"),
        ("pci_bus_id", "00000000:00:09.0"),
    )
    assert s["DCGM_FI_PROF_SM_ACTIVE"] == {labels: pytest.approx(0.75)}
    assert s["DCGM_FI_PROF_SM_OCCUPANCY"] == {labels: pytest.approx(0.4)}
    assert s["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] == {labels: pytest.approx(0.5)}
    assert "nvidia_smi_sm_activity_ratio" not in s


def test_dcgm_profiling_names_for_mig_instances() -> None:
    """MIG: dcgm-exporter's GPU_I_ID/GPU_I_PROFILE on instance series; empty (absent) on the whole GPU's."""
    fake, collector = make([mig_gpu()], metrics="all", pods=False)
    fake.set_gpm_activity(RAW_UUID, 2, tensor=0.3)
    scrape(collector)
    fake.advance_gpm(1.0)
    s = scrape(collector)
    by_instance = {
        dict(k)["GPU_I_ID"]: (dict(k)["GPU_I_PROFILE"], v)
        for k, v in s["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"].items()
    }
    assert by_instance == {"": ("", 0.0), "1": ("1g.10gb", 0.0), "2": ("3g.40gb", pytest.approx(0.3))}
    assert {dict(k)["UUID"] for k in s["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]} == {RAW_UUID}
    assert value(s, "nvidia_smi_mig_tensor_activity_ratio", gpu_instance_id="2") == pytest.approx(0.3)


def test_request_fits_pynvml_structs() -> None:
    """The metrics request the sampler builds is valid for nvidia-ml-py's own ctypes structs and constants."""
    pynvml = importlib.import_module("pynvml")
    sampler = GpmSampler(Nvml(pynvml))
    request = sampler._metrics_request()
    assert isinstance(request, pynvml.c_nvmlGpmMetricsGet_t)
    assert request.version == pynvml.NVML_GPM_METRICS_GET_VERSION
    assert request.numMetrics == len(GPM_METRICS)
    assert [request.metrics[i].metricId for i in range(len(GPM_METRICS))] == [
        getattr(pynvml, const) for const, _ in GPM_METRICS.values()
    ]
    assert [default for _, default in GPM_METRICS.values()] == [
        getattr(pynvml, const) for const, _ in GPM_METRICS.values()
    ]
    request.sample1 = pynvml.c_nvmlGpmSample_t()  # what nvmlGpmSampleAlloc returns
    request.sample2 = pynvml.c_nvmlGpmSample_t()
    # the fake's constants are pynvml's
    fake = FakeNvml()
    for name in (
        "NVML_GPM_METRIC_SM_UTIL",
        "NVML_GPM_METRIC_SM_OCCUPANCY",
        "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
        "NVML_GPM_METRIC_MAX",
        "NVML_GPM_METRICS_GET_VERSION",
        "NVML_GPM_SUPPORT_VERSION",
    ):
        assert getattr(fake, name) == getattr(pynvml, name), name
