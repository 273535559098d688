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

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # NumPy < 2.0
    byte_bounds = np.byte_bounds

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
            f"needs its first {ndim} axes to be {plan.local_shape} (owned entries plus halo)"
        )
    dtype = np.dtype(array.dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise FieldError(
            f"field {position} has dtype {dtype}; supported are "
            + ", ".join(str(t) for t in SUPPORTED_DTYPES)
        )
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        raise FieldError(f"field {position} is read-only; its halo cannot be written")
    strides = getattr(array, "strides", None)  # (NumPy's and CuPy's arrays: in bytes)
    if strides is not None and _overlaps_itself(shape, tuple(strides), dtype.itemsize):
        raise FieldError(
            f"field {position} overlaps itself (shape {shape}, strides {tuple(strides)} "
            "bytes: some of its elements share memory, as with a stride of 0); its halo "
            "writes would land on its owned cells"
        )
    return FieldSpec(dtype=dtype, level_shape=shape[ndim:])


def _overlaps_itself(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether an array of ``shape`` and ``strides`` may have elements at one address: its
    axes by stride, each must step past the whole extent of those below it (what every
    array NumPy allocates, and its views, do; a layout that interleaves its axes without
    sharing an element would also be refused, and none is known to be made)."""
    if 0 in shape:  # no element (NumPy gives such arrays strides of 0)
        return False
    reach = itemsize  # the bytes the axes below span
    for stride, n in sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1):
        if stride < reach:
            return True
        reach += stride * (n - 1)
    return False


def specs_of(plan: ExchangePlan, arrays: Sequence[Any]) -> tuple[FieldSpec, ...]:
    specs = tuple(field_spec(plan, a, i) for i, a in enumerate(arrays))
    check_disjoint(arrays, range(len(arrays)))
    return specs


#: Why the fields of one exchange must not share memory
ONE_EXCHANGE = "an exchange writes halos it reads as owned cells"


def check_disjoint(
    arrays: Sequence[Any], names: Sequence[int | str], why: str = ONE_EXCHANGE
) -> None:
    """A ``FieldError`` naming two of ``arrays`` that share an element, and ``why`` that is
    wrong: in one exchange, one field's halo would be another's owned cells (or the same
    cells twice), which no order of writes makes right. Views of one buffer that share
    nothing (``q[..., 0]``, ``q[..., 1]``) are fine."""
    views = [_addresses(a) for a in arrays]
    # only arrays whose address ranges overlap can share an element: swept in address order
    spans = sorted((*byte_bounds(view), k) for k, view in enumerate(views) if view.size)
    reaching: list[tuple[int, int]] = []  # (end, index) of the spans begun so far
    for begin, end, k in spans:
        reaching = [(e, i) for e, i in reaching if e > begin]
        for _, i in reaching:
            if np.shares_memory(views[i], views[k]):
                i, j = sorted((i, k))
                raise FieldError(
                    f"fields {names[i]} and {names[j]} share memory (the same array, or "
                    f"overlapping views of one buffer); {why}"
                )
        reaching.append((end, k))


def _addresses(array: Any) -> np.ndarray:
    """A NumPy array at the addresses of ``array``'s elements (host or device), for
    ``np.shares_memory``, which compares addresses and reads nothing."""
    if isinstance(array, np.ndarray):
        return array
    described = array.__cuda_array_interface__
    return np.asarray(
        _Interface(
            {
                "shape": described["shape"],
                "typestr": described["typestr"],
                "strides": described.get("strides"),
                "data": (described["data"][0], False),
                "version": 3,
            }
        )
    )


class _Interface:
    def __init__(self, described: dict) -> None:
        self.__array_interface__ = described


def _is_cupy_array(obj: Any) -> bool:
    return type(obj).__module__.startswith("cupy") and hasattr(obj, "__cuda_array_interface__")
