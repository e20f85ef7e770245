"""The Dynamic Resource Allocation objects kgpu reads (resource.k8s.io/v1, Kubernetes 1.34), as dataclasses,
with the API's limits (k8s.io/api/resource/v1 types.go).

DeviceClass, ResourceClaim (``Claim``, with its allocation and reservations), ResourceClaimTemplate and
ResourceSlice (``Device`` attributes typed as the API types them: int, bool, string, version), and
``DRAObjects``, what one input holds. :mod:`kgpu.model.dra` reads and validates them;
``kgpu.sim.scheduler.plugins.dynamicresources`` allocates from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgpu.model.objects import NodeSelector

API_VERSION = "resource.k8s.io/v1"
KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")

# k8s.io/api/resource/v1 types.go
DEVICE_REQUESTS_MAX = 32  # DeviceRequestsMaxSize
DEVICE_SELECTORS_MAX = 32  # DeviceSelectorsMaxSize
DEVICE_CONSTRAINTS_MAX = 32  # DeviceConstraintsMaxSize
DEVICE_CONFIG_MAX = 32  # DeviceConfigMaxSize
FIRST_AVAILABLE_MAX = 8  # FirstAvailableDeviceRequestMaxSize
TOLERATIONS_MAX = 16  # DeviceTolerationsMaxLength
SLICE_DEVICES_MAX = 128  # ResourceSliceMaxDevices
ATTRIBUTES_AND_CAPACITIES_MAX = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
ATTRIBUTE_VALUE_MAX = 64  # DeviceAttributeMaxValueLength
DRIVER_NAME_MAX = 63  # DriverNameMaxLength
POOL_NAME_MAX = 253  # PoolNameMaxLength
CEL_MAX_LENGTH = 10 * 1024  # CELSelectorExpressionMaxLength
ALLOCATION_RESULTS_MAX = 32  # AllocationResultsMaxSize
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize

EXACT_COUNT = "ExactCount"
ALL = "All"


@dataclass(frozen=True, slots=True)
class Selector:
    expression: str
    where: str  # file: object: field, for errors and warnings


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[Selector, ...]
    extended_resource_name: str
    where: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Exact:
    """One way to satisfy a request: ``exactly``, or one of ``firstAvailable``'s sub-requests."""

    name: str  # the request's name, or "<request>/<subrequest>"
    device_class: str
    selectors: tuple[Selector, ...]
    mode: str
    count: int
    admin_access: bool
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    name: str
    alternatives: tuple[Exact, ...]  # one for ``exactly``; the sub-requests in order for ``firstAvailable``
    first_available: bool


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]  # empty: every request
    match_attribute: str


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...]


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool


@dataclass(frozen=True, slots=True)
class Allocation:
    devices: tuple[AllocatedDevice, ...]
    node_selector: NodeSelector | None


@dataclass
class Claim:
    namespace: str
    name: str
    spec: ClaimSpec
    where: str
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()  # names of the pods it is reserved for
    deleting: bool = False
    uid: str = ""
    owner: tuple[str, str] = ("", "")  # the controlling owner (kind, name): a pod for template claims

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec
    where: str


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    # qualified name ("gpu.nvidia.com/productName") -> int | bool | str | ("semver", str)
    attributes: dict[str, Any]
    capacity: dict[str, int]  # qualified name -> value in milli-units


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str
    node_selector: NodeSelector | None
    all_nodes: bool
    devices: tuple[Device, ...]
    where: str


@dataclass
class DRAObjects:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)  # "namespace/name"
    templates: dict[str, ClaimTemplate] = field(default_factory=dict)
    slices: list[ResourceSlice] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @staticmethod
    def merged(parts: list[DRAObjects]) -> DRAObjects:
        """The objects of ``parts`` together, as one read of all their documents in turn gives them (a later
        object of a name replaces an earlier one); ``parts`` are left as they are."""
        if len(parts) == 1:
            return parts[0]
        out = DRAObjects()
        for p in parts:
            out.classes.update(p.classes)
            out.claims.update(p.claims)
            out.templates.update(p.templates)
            out.slices.extend(p.slices)
            out.warnings.extend(p.warnings)
        return out
