"""Turning user fields into arrays a plan can exchange, and rejecting those it cannot.

Accepted: NumPy arrays, CuPy arrays, and GT4Py fields (``gtx.Field``, whose ``.ndarray`` is the
whole allocated buffer). The decomposed axes come first and must have exactly the plan's local
shape; any trailing axes are vertical levels, in any memory order. Every check happens before
anything is posted to MPI, and the message names the field by its position in the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gt4py_halo.decomposition.plan import ExchangePlan, FieldSpec
from gt4py_halo.errors import FieldError

SUPPORTED_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


def as_array(field: Any, position: int) -> Any:
    """The array behind ``field``: itself for NumPy/CuPy, ``.ndarray`` for a GT4Py field."""
    if isinstance(field, np.ndarray) or _is_cupy_array(field):
        return field
    ndarray = getattr(field, "ndarray", None)
    if ndarray is not None and (isinstance(ndarray, np.ndarray) or _is_cupy_array(ndarray)):
        return ndarray
    raise FieldError(
        f"field {position} is a {type(field).__name__}; expected a NumPy or CuPy array "
        "or a GT4Py field"
    )


def field_spec(plan: ExchangePlan, array: Any, position: int | str) -> FieldSpec:
    """Check ``array`` (named by its ``position`` in the call, or its argument name) against
    ``plan`` and say what its messages carry."""
    ndim = len(plan.local_shape)
    shape = tuple(array.shape)
    if shape[:ndim] != plan.local_shape:
        raise FieldError(
            f"field {position} has shape {shape}, but plan {plan.name!r} on rank {plan.rank} "
            f"needs its first {ndim} axes to be {plan.local_shape} (owned cells plus halo)"
        )
    dtype = np.dtype(array.dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise FieldError(
            f"field {position} has dtype {dtype}; supported are "
            + ", ".join(str(t) for t in SUPPORTED_DTYPES)
        )
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        raise FieldError(f"field {position} is read-only; its halo cannot be written")
    return FieldSpec(dtype=dtype, level_shape=shape[ndim:])


def specs_of(plan: ExchangePlan, arrays: Sequence[Any]) -> tuple[FieldSpec, ...]:
    return tuple(field_spec(plan, a, i) for i, a in enumerate(arrays))


def _is_cupy_array(obj: Any) -> bool:
    return type(obj).__module__.startswith("cupy") and hasattr(obj, "__cuda_array_interface__")
