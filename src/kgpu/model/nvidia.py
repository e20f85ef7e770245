"""NVIDIA's names on a node: the extended resources the device plugin advertises and the labels that GPU
Feature Discovery, the device plugin's config-manager sidecar and the GPU Operator's MIG manager read and
write.

They are written once, here, for every reader: the device plugin's rules (``kgpu.model.sharing``), the GPU
inventory (``kgpu.model.gpus``), the profile's pools (a shared pool's nodes carry the labels that select
their configs: ``kgpu.model.profile_pool``), doctor, the simulator and the renderers.
"""

from kgpu.catalog.instance import RESOURCE_NVIDIA_GPU

# The node labels that choose a node's device-plugin config (a key of the plugin's ConfigMap, read by its
# config-manager sidecar) and its mig-parted config (read by the GPU Operator's MIG manager).
LABEL_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"

MIG_CONFIG_LABEL = LABEL_MIG_CONFIG

GPU = RESOURCE_NVIDIA_GPU
SHARED_SUFFIX = ".shared"
MIG_PREFIX = "nvidia.com/mig-"
LABEL_MIG_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_SHARING = "nvidia.com/gpu.sharing-strategy"
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
