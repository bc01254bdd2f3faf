"""Public bin grids and noisy cell counts: the layer under every histogram release
(:mod:`dpcore.stats`, :mod:`dpcore.mestimators`, :mod:`dpcore.distributed`,
:mod:`dpcore.publish`), with the index arithmetic the publishing families share (complete trees
over the bins, boxes of cells).

Privacy
-------
Validation of public bins, exact counting and per-cell noise; the releases that use it state
their guarantees.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcore import _histogram
from dpcore import _validation as check
from dpcore._release.sums import IntegerNoise
from dpcore.mechanisms import discrete_gaussian, discrete_laplace

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["MAX_BRANCHING", "MAX_HISTOGRAM_CELLS", "NONNEGATIVE", "OUTSIDE", "RELATIONS", "BinGrid",
           "add_cell_noise", "arith_edges", "box_queries", "histogram_noise",
           "nonnegative_least_squares", "nonnegative_mode", "postprocess_counts", "pow2_at_least",
           "sample_2d", "tree_levels"]

OUTSIDE = ("drop", "clip")
RELATIONS = ("add_remove", "replace")
#: Largest number of histogram cells, checked before anything is allocated or charged: 2**28
#: cells take 2 GiB as int64 counts (and as much again for the noise).
MAX_HISTOGRAM_CELLS = 2**28
#: Largest branching factor accepted (beyond it the tree is a flat histogram plus a root).
MAX_BRANCHING = 2**16


def arith_edges(lower: float, upper: float, bins: int) -> np.ndarray:
    """j * step + lower for j < bins, each operation rounded once (as the kernel computes them)."""
    step = (upper - lower) / bins
    return np.arange(bins, dtype=np.float64) * step + lower


def tree_levels(n_leaves: int, branching: int) -> int:
    """Levels (root and leaves included) of the smallest complete ``branching``-ary tree with
    at least ``n_leaves`` leaves: 1 + ceil(log_branching(n_leaves)).

    Privacy
    -------
    Arithmetic on public sizes: reads no data, releases and charges nothing. A record counts
    once per level, so a hierarchical histogram's L1 sensitivity is this number of levels.
    """
    n_leaves = check.integer(n_leaves, "n_leaves", minimum=1)
    branching = check.integer(branching, "branching", minimum=2, maximum=MAX_BRANCHING)
    levels, width = 1, 1
    while width < n_leaves:  # integer arithmetic: no log rounding at exact powers
        width *= branching
        levels += 1
    return levels


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1): an axis padded to a complete binary tree."""
    return 1 << max(int(n) - 1, 0).bit_length()


def box_queries(lo: ArrayLike, hi: ArrayLike, shape: tuple[int, ...], what: str
                ) -> tuple[np.ndarray, np.ndarray]:
    """Integer boxes [lo, hi) in a grid of ``shape``: 1-d grids take scalars/arrays, d-dim grids
    arrays whose last axis has length d. Returns (lo, hi) as int64 arrays of shape (..., d)."""
    d = len(shape)
    lo_a = check.real_array(lo, "lo")
    hi_a = check.real_array(hi, "hi")
    for arr, name in ((lo_a, "lo"), (hi_a, "hi")):
        if not (np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_):
            raise TypeError(f"{name} must be integer {what} indices, got dtype {arr.dtype}")
        if d > 1 and (arr.ndim == 0 or arr.shape[-1] != d):
            raise ValueError(f"{name} must end in an axis of length {d} (one index per axis), "
                             f"got shape {arr.shape}")
    lo_b, hi_b = np.broadcast_arrays(lo_a, hi_a)
    if d == 1:
        lo_b, hi_b = lo_b[..., None], hi_b[..., None]
    limit = np.array(shape)
    if np.any(lo_b < 0) or np.any(hi_b > limit) or np.any(lo_b > hi_b):
        raise ValueError(f"ranges must satisfy 0 <= lo <= hi <= shape = {tuple(shape)}")
    return lo_b.astype(np.int64), hi_b.astype(np.int64)


@dataclass(frozen=True, eq=False)
class BinGrid:
    """Public bin edges of a d-dimensional grid, in the form the kernel takes them."""

    edges: tuple[np.ndarray, ...]  # d strictly increasing float64 arrays
    uniform: np.ndarray  # uint8 per axis: 0 explicit edges, 1 linspace, 2 linspace = j*step+lo

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(e.size - 1 for e in self.edges)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @classmethod
    def make_1d(cls, bins: Any, value_range: Any) -> BinGrid:
        """One axis: ``bins`` an int or an edge array, ``value_range`` (lower, upper) or None."""
        if isinstance(bins, (str, bytes)):
            raise ValueError(f"bins must be an int or an array of edges, got {bins!r}: rules such "
                             "as 'auto' look at the data")
        return cls.make([bins], None if value_range is None else [value_range], 1)

    @classmethod
    def make(cls, bins: Any, value_range: Any, d: int) -> BinGrid:
        """Validate numpy.histogramdd-style public ``bins`` and ``range`` for d axes."""
        if isinstance(bins, (str, bytes)):
            raise ValueError(f"bins must be ints or arrays of edges, got {bins!r}: rules such as "
                             "'auto' look at the data")
        if isinstance(bins, (int, np.integer)) and not isinstance(bins, (bool, np.bool_)):
            bins = [bins] * d
        try:
            bins = list(bins)
        except TypeError:
            raise TypeError(f"bins must be an int or a sequence of d = {d} ints or edge arrays, "
                            f"got {type(bins).__name__}") from None
        if len(bins) != d:
            raise ValueError(f"bins must have one entry per dimension (d = {d}), got {len(bins)}")
        if value_range is None:
            value_range = [None] * d
        else:
            value_range = list(value_range)
            if d == 1 and len(value_range) == 2 and not hasattr(value_range[0], "__len__"):
                value_range = [value_range]  # range=(lo, hi) for one dimension
            if len(value_range) != d:
                raise ValueError(f"range must have one (lower, upper) pair per dimension "
                                 f"(d = {d}), got {len(value_range)}")
        edges, uniform = [], []
        for k, (b, r) in enumerate(zip(bins, value_range)):
            if isinstance(b, (int, np.integer)) and not isinstance(b, (bool, np.bool_)):
                b = check.integer(b, f"bins[{k}]", minimum=1)
                lower, upper = check.bounds_pair(r, f"range[{k}]")
                if not math.isfinite(upper - lower):
                    raise ValueError(f"range[{k}] is too wide: upper - lower overflows a double")
                e = np.linspace(lower, upper, b + 1)  # numpy.histogramdd's edges
                # mode 2 when every edge below the last is j * step + lower in doubles (numpy's
                # linspace formula): the kernel then computes edges instead of loading them
                uniform.append(2 if np.array_equal(arith_edges(lower, upper, b), e[:-1]) else 1)
            else:
                e = check.finite_array(b, f"bins[{k}]")
                if e.ndim != 1 or e.size < 2:
                    raise ValueError(f"bins[{k}] must be an int >= 1 or a 1-d array of at least 2 "
                                     f"edges, got shape {e.shape}")
                if r is not None:
                    lower, upper = check.bounds_pair(r, f"range[{k}]")
                    if lower != e[0] or upper != e[-1]:
                        raise ValueError(f"range[{k}] ({lower!r}, {upper!r}) disagrees with the "
                                         f"edges in bins[{k}] ({e[0]!r}, {e[-1]!r})")
                uniform.append(0)
            if not np.all(np.diff(e) > 0):
                raise ValueError(f"bins[{k}] must give strictly increasing edges")
            with np.errstate(over="ignore", divide="ignore"):
                width = e[-1] - e[0]
                per_unit = (e.size - 1) / width
            if not (math.isfinite(width) and math.isfinite(per_unit) and per_unit > 0
                    and np.all(np.diff(e) >= np.finfo(np.float64).tiny)):
                raise ValueError(
                    f"range[{k}] / bins[{k}] give bins too narrow or too wide for double "
                    f"precision (width {float(width)!r} over {e.size - 1} bins); rescale the data"
                )
            edges.append(np.ascontiguousarray(e, dtype=np.float64))
        size = math.prod(e.size - 1 for e in edges)
        if size > MAX_HISTOGRAM_CELLS:
            raise ValueError(f"bins give {size} cells, more than MAX_HISTOGRAM_CELLS = "
                             f"{MAX_HISTOGRAM_CELLS} (2**28, 2 GiB of counts)")
        return cls(tuple(edges), np.array(uniform, dtype=np.uint8))

    @functools.cached_property
    def kernel_args(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                   np.ndarray, np.ndarray, np.ndarray]:
        shape = self.shape
        strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
        offsets = np.cumsum([0] + [e.size for e in self.edges[:-1]]).astype(np.int64)
        scales = np.array([(e.size - 1) / (e[-1] - e[0]) for e in self.edges])
        steps = np.array([(e[-1] - e[0]) / (e.size - 1) for e in self.edges])
        # the kernel's fast-path margin (proof in dpcore/_histogram.pyx); 1.0 disables it
        margins = np.array([
            min(1.0, 2.0**-49 * (e.size - 1) * (1 + (abs(e[0]) + abs(e[-1])) / (e[-1] - e[0])))
            if u == 2 else 1.0 for e, u in zip(self.edges, self.uniform)])
        return (np.concatenate(self.edges), offsets, np.array(shape, dtype=np.int64),
                np.array(strides, dtype=np.int64), scales, steps, margins, self.uniform)

    def count_rows_into(self, sample: np.ndarray, counts: np.ndarray, clip: bool) -> tuple[int, int]:
        """counts (flat int64, C order) += the cell counts of a C-contiguous float32/float64
        (n, d) sample. Returns (rows not counted, rows with NaN/inf) without raising: chunked
        callers (dpcore.distributed) sum both over the chunks and decide at the end."""
        return _histogram.count_into(sample, *self.kernel_args, clip, counts)

    def count_into(self, sample: np.ndarray, counts: np.ndarray, clip: bool,
                   name: str = "sample") -> int:
        """counts (flat int64, C order) += the cell counts of a validated (n, d) sample.
        Returns the number of rows not counted; raises ValueError naming ``name`` on NaN/inf."""
        sample = np.ascontiguousarray(sample)  # a no-op for the validated samples
        dropped, bad = self.count_rows_into(sample, counts, clip)
        if bad:
            raise ValueError(f"{name} must not contain NaN or infinite values")
        return dropped


def sample_2d(sample: ArrayLike, name: str = "sample") -> np.ndarray:
    """numpy.histogramdd's reading of ``sample``: (N, D), or 1-d as N points in one dimension.
    Returns a C-contiguous float32/float64 array (NaN is rejected later, by the kernel)."""
    if isinstance(sample, (str, bytes)):
        raise TypeError(f"{name} must be an array of numbers, got {type(sample).__name__}")
    try:
        arr = np.asarray(sample)
    except Exception as exc:
        raise TypeError(f"{name} must be an array of numbers: {exc}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_) \
            or np.iscomplexobj(arr):
        raise TypeError(f"{name} must contain real numbers, got dtype {arr.dtype}")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be (N, D) or 1-d, got shape {arr.shape}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column, got shape {arr.shape}")
    dtype = arr.dtype if arr.dtype in (np.float32, np.float64) else np.float64
    return np.ascontiguousarray(arr, dtype=dtype)


def histogram_noise(mechanism: str, relation: str, epsilon: float, delta: float) -> IntegerNoise:
    """Calibrated per-cell integer noise: L1 sensitivity 1 (add/remove) or 2 (replace-one)."""
    if relation not in RELATIONS:
        raise ValueError(f"relation must be 'add_remove' or 'replace', got {relation!r}")
    if relation == "replace" and mechanism == "gaussian":
        raise ValueError("relation='replace' is supported with mechanism='laplace' only "
                         "(two cells move; use relation='add_remove' for the Gaussian)")
    return IntegerNoise.calibrate(mechanism, 2 if relation == "replace" else 1, epsilon, delta)


def add_cell_noise(counts: np.ndarray, noise: IntegerNoise, rng: np.random.Generator) -> None:
    """counts (flat int64) += independent noise in every cell, empty ones included."""
    if noise.mechanism == "laplace":
        discrete_laplace(noise.scale, add_to=counts, random_state=rng)
    else:
        discrete_gaussian(noise.scale, add_to=counts, random_state=rng)


def nonnegative_least_squares(y: np.ndarray, total: float, weight: float = math.inf) -> np.ndarray:
    """The x >= 0 minimising sum((x - y)**2) + weight (sum(x) - total)**2 (Lee, Wang, Kifer
    2015, least squares): weight = inf makes sum(x) = max(total, 0) a hard constraint (the
    Euclidean projection onto the scaled simplex).

    The KKT conditions give x = max(y - theta, 0) with theta = weight (sum(x) - total); sorting
    y decreasingly (u_1 >= u_2 >= ...) with prefix sums C_m, theta = weight (C_m - total) /
    (1 + weight m) for the largest m with u_m > that theta (theta = (C_m - total) / m for an
    infinite weight); O(n log n). ``y`` is finite float64 (validated by the caller).
    """
    flat = y.reshape(-1)
    if flat.size == 0:
        return y.astype(np.float64)
    u = np.sort(flat)[::-1]
    csum = np.cumsum(u)
    m = np.arange(1, u.size + 1, dtype=np.float64)
    if weight == math.inf:
        if total <= 0.0:
            return np.zeros(y.shape)
        theta_m = (csum - total) / m
        theta_none = -math.inf  # unused: with total > 0 the largest count is always active
    else:
        theta_m = weight * (csum - total) / (1.0 + weight * m)
        theta_none = -weight * total  # every count at 0
    active = np.nonzero(u > theta_m)[0]  # a prefix: u_m - theta_m is non-increasing in m
    theta = theta_m[active[-1]] if active.size else theta_none
    return np.maximum(y - theta, 0.0)


#: Post-processing of noisy counts (``nonnegative=``): negatives set to 0, or the least-squares
#: projection onto non-negative counts with a given total.
NONNEGATIVE = ("clamp", "project")


def nonnegative_mode(nonnegative: bool | str | None, consistent: bool = False) -> str | None:
    """The post-processing asked for: None (raw counts), "clamp" or "project" (``True`` and
    ``consistent=True`` mean "project", as in earlier versions)."""
    if not isinstance(consistent, (bool, np.bool_)):
        raise TypeError(f"consistent must be True or False, got {type(consistent).__name__}")
    if isinstance(nonnegative, str):
        if nonnegative not in NONNEGATIVE:
            raise ValueError(f"nonnegative must be 'clamp', 'project', True or False, got "
                             f"{nonnegative!r}")
        mode = nonnegative
    elif isinstance(nonnegative, (bool, np.bool_)) or nonnegative is None:
        mode = "project" if nonnegative else None
    else:
        raise TypeError(f"nonnegative must be 'clamp', 'project', True or False, got "
                        f"{type(nonnegative).__name__}")
    return "project" if consistent else mode


def postprocess_counts(counts: np.ndarray, mode: str | None, total: float | None = None
                       ) -> np.ndarray:
    """Noisy int64 counts after ``mode`` (from :func:`nonnegative_mode`): unchanged, clamped at
    0 (int64), or projected (float64) onto non-negative counts adding up to ``total`` (the
    noisy total, 0 if negative, when None)."""
    if mode is None:
        return counts
    if mode == "clamp":
        return np.maximum(counts, 0)
    # the total kept: clamping negatives alone would bias the total upwards
    total = float(counts.sum()) if total is None else float(total)
    return nonnegative_least_squares(counts.astype(np.float64), total)
