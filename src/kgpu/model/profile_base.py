"""What every section of the cluster profile (``kgpu.model.profile``) shares: the model configuration and
two field checks.

Every section is frozen, reads camelCase in YAML and snake_case in Python (either populates it), rejects
unknown fields (a typo must not silently drop a taint) and refuses ``.inf``/``nan`` where it takes a number.
Resource quantities parse as apimachinery's ``resource.Quantity`` does; label keys are qualified names.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from kgpu.errors import InputError, quote
from kgpu.model.names import is_qualified_name


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_enum_values=True,
        allow_inf_nan=False,  # `hourlyPrice: .inf` is a typo, not a price
    )


def _check_quantities(values: dict[str, Any]) -> None:
    """Resource quantities (a pool's limits, a static node's cpu/memory) as apimachinery parses them."""
    from kgpu.model.quantity import resource_amount

    for name, raw in values.items():
        try:
            resource_amount(raw, milli=name == "cpu")
        except InputError as exc:
            raise ValueError(f"{name}: {exc.message}") from None


def _check_label_key(key: str) -> str:
    if not is_qualified_name(key):
        raise ValueError(f"{quote(key)} is not a valid label key")
    return key
