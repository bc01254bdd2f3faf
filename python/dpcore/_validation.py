"""Argument checks shared by every public function.

Each check raises ``TypeError`` for a wrong type and ``ValueError`` for a value out of range, naming
the parameter, the accepted range and the value received. Checks run once, in Python, before any
kernel is called; kernels never validate.
"""
from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Collection
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

__all__ = [
    "real",
    "positive",
    "nonnegative",
    "probability",
    "integer",
    "real_array",
    "finite_array",
    "bounds_pair",
    "size_shape",
    "privacy_loss",
    "epsilon",
    "option",
    "memory",
    "MAX_EPSILON",
    "MAX_RHO",
    "MAX_RELEASE_BYTES",
]

#: Largest epsilon (and rho) a release may be charged: far beyond any meaningful guarantee, and
#: small enough that the accountant's exact arithmetic (epsilon**2 / 2, conversions) cannot
#: overflow a double.
MAX_EPSILON = 2.0**40
MAX_RHO = 2.0**80
#: Largest working memory a release may need (its arrays, estimated from public sizes): checked
#: before anything is charged, so a release too large for the machine fails unpaid.
MAX_RELEASE_BYTES = 2**32


def real(value: object, name: str) -> float:
    """Return ``value`` as a finite Python float; reject bools, non-numbers, NaN and infinities."""
    if type(value) is not float:  # a float needs no conversion (the per-draw paths pass floats)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
        value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def positive(value: object, name: str) -> float:
    """A finite real number > 0."""
    value = real(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return value


def nonnegative(value: object, name: str) -> float:
    """A finite real number >= 0."""
    value = real(value, name)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return value


def probability(value: object, name: str, *, open_low: bool = True, open_high: bool = True) -> float:
    """A real number in the unit interval (open or closed ends as requested)."""
    value = real(value, name)
    low_ok = value > 0 if open_low else value >= 0
    high_ok = value < 1 if open_high else value <= 1
    if not (low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return value


def integer(value: Any, name: str, *, minimum: int | None = None,
            maximum: int | None = None) -> int:
    """A Python int (numpy integers accepted, bools and floats rejected), optionally within
    [minimum, maximum]."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got bool {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value!r}")
    return value


def real_array(value: object, name: str) -> np.ndarray:
    """Convert to an ndarray of real numbers (any shape); reject strings, ragged input, objects
    and complex values. Values are not checked (see `finite_array`)."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a number or an array of numbers, got {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"{name} must be a number or an array of numbers: {exc}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise TypeError(f"{name} must contain real numbers, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must contain real numbers, got complex values")
    return arr


def finite_array(value: object, name: str, *, dtype: DTypeLike = np.float64) -> np.ndarray:
    """Convert to a float64 ndarray (any shape) and reject non-numeric, NaN and infinite entries."""
    arr = real_array(value, name).astype(dtype, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must not contain NaN or infinite values")
    return arr


def bounds_pair(value: Any, name: str) -> tuple[float, float]:
    """A pair (lower, upper) of finite reals with lower < upper."""
    if value is None:
        raise ValueError(
            f"{name} is required: give public bounds (lower, upper); they are never inferred from the data"
        )
    try:
        lower, upper = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (lower, upper), got {value!r}") from None
    lower = real(lower, f"{name}[0]")
    upper = real(upper, f"{name}[1]")
    if not lower < upper:
        raise ValueError(f"{name} must satisfy lower < upper, got ({lower!r}, {upper!r})")
    return lower, upper


def size_shape(size: int | tuple[int, ...] | list[int] | None,
               name: str = "size") -> tuple[int, ...] | None:
    """Normalise a numpy-style ``size`` (None, int or tuple of ints) to a shape tuple or None."""
    if size is None:
        return None
    if isinstance(size, (tuple, list)):
        return tuple(integer(s, name, minimum=0) for s in size)
    return (integer(size, name, minimum=0),)


def privacy_loss(value: object, name: str, maximum: float) -> float:
    """A privacy parameter (epsilon or rho): finite, >= 0 and <= ``maximum``."""
    value = nonnegative(value, name)
    if value > maximum:
        raise ValueError(f"{name} must be <= {maximum!r} (no meaningful guarantee above), got {value!r}")
    return value


def epsilon(value: object, name: str = "epsilon", *, minimum: float | None = None,
            maximum: float = MAX_EPSILON) -> float:
    """The one epsilon check: a finite number > 0 and <= ``maximum`` (MAX_EPSILON unless a
    mechanism's calibration is proven on a narrower range), and >= ``minimum`` when given."""
    value = positive(value, name)
    if value > maximum:
        raise ValueError(f"{name} must be <= {maximum!r} (no meaningful guarantee above), "
                         f"got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum!r} for this mechanism, got {value!r}")
    return value


def option(value: object, name: str, choices: Collection[str]) -> str:
    """``value`` if it is one of ``choices`` (strings), else a ValueError listing them."""
    if isinstance(value, str) and value in choices:
        return value
    quoted = [repr(c) for c in choices]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    raise ValueError(f"{name} must be {listed}, got {value!r}")


def memory(nbytes: float, what: str) -> None:
    """Refuse a release whose arrays (``nbytes``, estimated from public sizes) exceed
    MAX_RELEASE_BYTES; ``what`` names the parameters that set the size."""
    if nbytes > MAX_RELEASE_BYTES:
        raise ValueError(f"{what} need about {nbytes / 2**30:.3g} GiB of working memory, more "
                         f"than MAX_RELEASE_BYTES = {MAX_RELEASE_BYTES / 2**30:g} GiB; use fewer "
                         "bins (or cells, or a smaller maximum)")
