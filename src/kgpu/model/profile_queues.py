"""The profile's job queues (``queues``): teams sharing the pools' GPUs through Kueue.

Each team becomes a Kueue ClusterQueue with a LocalQueue in each of its namespaces; each pool becomes a
ResourceFlavor (``kgpu.render.kueue``). A team's quota is given per pool: GPUs (``nvidia.com/gpu``), and
optionally CPU and memory, each a nominal quota with an optional ``borrowingLimit`` and ``lendingLimit``,
the fields of Kueue's ``ResourceQuota`` (``apis/kueue/v1beta2/clusterqueue_types.go``). Every team sits in
one cohort unless it names its own, so unused quota is lent between teams.

The defaults are the ones a shared GPU cluster usually wants, not Kueue's own (``Never`` for both
preemption policies): ``reclaimWithinCohort: Any`` (a team gets back the quota it lent, by preempting the
borrowers), ``withinClusterQueue: LowerPriority`` (a team's urgent job preempts its own less urgent ones).

Quantities parse as apimachinery's ``resource.Quantity`` does; pool names are checked against the
profile's pools by ``Profile`` (:meth:`Queues.check`), so an error names the field
(``queues.teams[0].quotas[1].pool``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from kgpu.errors import InputError, quote
from kgpu.model.names import (
    DNS1123_LABEL_MAX_LENGTH,
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_MAX_LENGTH,
    DNS1123_SUBDOMAIN_PATTERN,
)
from kgpu.model.nvidia import GPU as GPU_RESOURCE
from kgpu.model.profile_base import _Model

# Kueue's CRDs: at most 64 flavors per resource group (ClusterQueue), priority values are int32.
MAX_TEAMS = 1000
MAX_FLAVORS = 64
INT32_MAX = 2**31 - 1
DEFAULT_COHORT = "kgpu"
# cluster-autoscaler's ProvisioningRequest class that scales node groups up for the whole workload at once
# (kubernetes/autoscaler, provisioningrequest/besteffortatomic), or not at all.
DEFAULT_PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

Amount = str | int


def _amount(raw: Amount, resource: str) -> Amount:
    from kgpu.model.quantity import resource_amount

    if isinstance(raw, bool):
        raise ValueError(f"{quote(raw)} is not a quantity")
    try:
        resource_amount(raw, milli=resource == "cpu")
    except InputError as exc:
        raise ValueError(f"{quote(raw)} is not a quantity: {exc.message}") from None
    return raw


class Quota(_Model):
    """One resource's quota in one flavor: Kueue's ``nominalQuota``, ``borrowingLimit``, ``lendingLimit``.
    A bare quantity (``gpu: 8``) is the nominal quota alone."""

    nominal: Amount = Field(description="quota the team owns in this pool (nominalQuota)")
    borrowing_limit: Amount | None = Field(
        default=None, description="most the team may borrow from the cohort beyond nominal; unset: no limit"
    )
    lending_limit: Amount | None = Field(
        default=None, description="most of its unused nominal quota the team lends to the cohort; unset: all"
    )

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, data: Any) -> Any:
        if isinstance(data, str | int) and not isinstance(data, bool):
            return {"nominal": data}
        return data

    def checked(self, resource: str) -> Quota:
        """Each amount a quantity; lendingLimit at most nominal, as Kueue's ClusterQueue webhook requires
        (``pkg/webhooks/clusterqueue_webhook.go``, validateLendingLimit)."""
        for value in (self.nominal, self.borrowing_limit, self.lending_limit):
            if value is not None:
                _amount(value, resource)
        nominal, _, lend = self.amounts(resource)
        if lend is not None and lend > nominal:
            raise ValueError(
                f"lendingLimit {quote(self.lending_limit)} must be less than or equal to the nominalQuota "
                f"({quote(self.nominal)})"
            )
        return self

    def amounts(self, resource: str) -> tuple[int, int | None, int | None]:
        """(nominal, borrowingLimit, lendingLimit) in Kueue's units: millicores for cpu, else Value()."""
        from kgpu.model.quantity import resource_amount

        milli = resource == "cpu"

        def one(v: Amount | None) -> int | None:
            return None if v is None else resource_amount(v, milli=milli)

        nominal = one(self.nominal)
        assert nominal is not None
        return nominal, one(self.borrowing_limit), one(self.lending_limit)


class PoolQuota(_Model):
    """A team's quota in one pool (its ResourceFlavor)."""

    pool: str = Field(description="a pool of the profile (pools[].name)")
    gpu: Quota = Field(
        default_factory=lambda: Quota(nominal=0), description="nvidia.com/gpu; default 0 (borrow only)"
    )
    cpu: Quota | None = Field(
        default=None, description="default: the pool's cpu limit (Karpenter limits, or node group maxSize)"
    )
    memory: Quota | None = Field(
        default=None, description="default: the pool's memory limit (Karpenter limits, or node group maxSize)"
    )

    @field_validator("gpu", "cpu", "memory")
    @classmethod
    def _quantities(cls, quota: Quota | None, info: ValidationInfo) -> Quota | None:
        if quota is not None:
            quota.checked(GPU_RESOURCE if info.field_name == "gpu" else str(info.field_name))
        return quota


class Team(_Model):
    """A team: one ClusterQueue (named after the team) and a LocalQueue in each of its namespaces."""

    name: str = Field(
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        description="the ClusterQueue's name, and the LocalQueues' unless localQueue is set",
    )
    namespaces: list[str] = Field(min_length=1, max_length=100, description="namespaces whose jobs it runs")
    quotas: list[PoolQuota] = Field(
        min_length=1, max_length=MAX_FLAVORS, description="per pool; pools not listed: no quota"
    )
    cohort: str | None = Field(
        default=None,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        description="its own cohort instead of queues.cohort",
    )
    local_queue: str | None = Field(
        default=None,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        description="the LocalQueue name jobs give in kueue.x-k8s.io/queue-name; default: the team's name",
    )

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: list[str]) -> list[str]:
        import re

        for i, ns in enumerate(v):
            if len(ns) > DNS1123_LABEL_MAX_LENGTH or not re.fullmatch(DNS1123_LABEL_PATTERN, ns):
                raise ValueError(f"[{i}]: {quote(ns)} is not a namespace name (DNS-1123 label)")
        twice = sorted({n for n in v if v.count(n) > 1})
        if twice:
            raise ValueError(f"listed twice: {', '.join(twice)}")
        return v

    @model_validator(mode="after")
    def _pools_once(self) -> Team:
        pools = [q.pool for q in self.quotas]
        twice = sorted({p for p in pools if pools.count(p) > 1})
        if twice:
            raise ValueError(f"quotas: pool {', '.join(twice)} listed twice")
        return self

    @property
    def queue_name(self) -> str:
        return self.local_queue or self.name


class Preemption(_Model):
    """The ClusterQueue's ``preemption`` (Kueue's classical preemption)."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        default="Any", description="preempt borrowers in the cohort to get lent quota back"
    )
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        default="LowerPriority", description="preempt the team's own workloads of lower priority"
    )


class PriorityClass(_Model):
    """A WorkloadPriorityClass (``kueue.x-k8s.io/priority-class`` on a job)."""

    name: str = Field(pattern=DNS1123_SUBDOMAIN_PATTERN, max_length=DNS1123_SUBDOMAIN_MAX_LENGTH)
    value: int = Field(strict=True, ge=-(2**31), le=INT32_MAX)
    description: str = Field(default="", max_length=1000)


class Queues(_Model):
    """Kueue set up from the profile: one ResourceFlavor per pool, one ClusterQueue per team."""

    teams: list[Team] = Field(min_length=1, max_length=MAX_TEAMS)
    cohort: str = Field(
        default=DEFAULT_COHORT,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        description="the cohort every team shares (unused quota is lent within it)",
    )
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = Field(
        default="BestEffortFIFO",
        description="BestEffortFIFO: a job that does not fit lets smaller ones behind it in; StrictFIFO: it waits",
    )
    preemption: Preemption = Field(default_factory=Preemption)
    priority_classes: list[PriorityClass] = Field(default_factory=list, max_length=100)
    inject_tolerations: bool = Field(
        default=False,
        description="add each tainted pool's tolerations to the pods Kueue admits on it; Kueue then no longer "
        "keeps pods that do not tolerate the taint off the pool",
    )
    provisioning_class: str = Field(
        default=DEFAULT_PROVISIONING_CLASS,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        max_length=DNS1123_SUBDOMAIN_MAX_LENGTH,
        description="cluster-autoscaler node groups: the ProvisioningRequest class of the admission check",
    )

    @model_validator(mode="after")
    def _unique(self) -> Queues:
        for what, names in (
            ("teams", [t.name for t in self.teams]),
            ("priorityClasses", [p.name for p in self.priority_classes]),
        ):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what}: names must be unique, repeated: {', '.join(twice)}")
        queues = [(ns, t.queue_name) for t in self.teams for ns in t.namespaces]
        shared = sorted({q for q in queues if queues.count(q) > 1})
        if shared:
            ns, name = shared[0]
            raise ValueError(
                f"teams: two teams have LocalQueue {name} in namespace {ns}; set localQueue on one of them"
            )
        cohorts = {t.cohort or self.cohort for t in self.teams}
        clash = sorted(cohorts & {t.name for t in self.teams})
        if clash:
            raise ValueError(f"cohort {clash[0]} has the name of a team's ClusterQueue; name it differently")
        return self

    def check(self, pools: list[str]) -> str | None:
        """The first quota naming a pool the profile lacks, as ``queues.teams[i].quotas[j].pool: ...``."""
        if len(pools) > MAX_FLAVORS:
            return f"queues: {len(pools)} pools, and a ClusterQueue takes at most {MAX_FLAVORS} flavors"
        for i, team in enumerate(self.teams):
            for j, quota in enumerate(team.quotas):
                if quota.pool not in pools:
                    import difflib

                    close = difflib.get_close_matches(quota.pool, pools, n=1)
                    hint = f"; did you mean {close[0]}?" if close else f" ({', '.join(pools)})"
                    return f"queues.teams[{i}].quotas[{j}].pool: {quote(quota.pool)} is not a pool{hint}"
        return None

    def cohort_of(self, team: Team) -> str:
        return team.cohort or self.cohort
