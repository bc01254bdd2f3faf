"""Domain compression from noisy 1-way marginals (MST's step between its two measurements).

A code whose noisy count is below a public threshold (three noise standard deviations) carries
mostly noise; merging all such codes of a column into one keeps the 2-way marginals small and
their cells well above the noise. The rule reads only released noisy counts: post-processing.
A column keeps at least two codes (when it has two). Decoding a merged code draws one of its
codes uniformly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["Compression", "COMPRESSION_THRESHOLD"]

#: Codes whose noisy count is below this many noise standard deviations are merged.
COMPRESSION_THRESHOLD = 3.0


@dataclass(frozen=True, eq=False)
class Compression:
    """Per column, the original codes kept (``supports``); the others share one last code."""

    supports: tuple  # bool array per column (original codes)

    @classmethod
    def from_noisy(cls, one_way: Sequence[ArrayLike], std: float,
                   threshold: float = COMPRESSION_THRESHOLD) -> Compression:
        supports = []
        for y in one_way:
            keep = np.asarray(y) >= threshold * std
            if keep.sum() < 2 or keep.all():  # fewer than two codes left: do not compress
                keep = np.ones(np.size(y), dtype=bool)
            supports.append(keep)
        return cls(tuple(supports))

    @property
    def sizes(self) -> tuple:
        """Codes per column after compression."""
        return tuple(int(s.sum()) + int(not s.all()) for s in self.supports)

    def maps(self) -> list:
        """Per column, the compressed code of each original code."""
        out = []
        for keep in self.supports:
            m = np.full(keep.size, int(keep.sum()), dtype=np.int64)
            m[keep] = np.arange(int(keep.sum()))
            out.append(m)
        return out

    def codes(self, codes: np.ndarray) -> np.ndarray:
        """Original codes (n, d) -> compressed codes."""
        return np.column_stack([m[codes[:, j]] for j, m in enumerate(self.maps())])

    def one_way(self, noisy: ArrayLike, variance: float, column: int
                ) -> tuple[np.ndarray, np.ndarray]:
        """A column's noisy 1-way counts and per-cell variance on the compressed codes: the
        merged code's count is the sum of its members' (variance times their number)."""
        keep = self.supports[column]
        noisy = np.asarray(noisy, dtype=np.float64)
        if keep.all():
            return noisy, np.full(noisy.size, variance)
        merged = int((~keep).sum())
        return (np.append(noisy[keep], noisy[~keep].sum()),
                np.append(np.full(int(keep.sum()), variance), variance * merged))

    def expand(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Compressed codes -> original codes; a merged code becomes one of its members,
        uniformly (post-processing)."""
        out = np.empty_like(codes)
        for j, keep in enumerate(self.supports):
            kept, merged = np.nonzero(keep)[0], np.nonzero(~keep)[0]
            column = codes[:, j]
            if merged.size == 0:
                out[:, j] = kept[column]
                continue
            is_merged = column == kept.size
            out[~is_merged, j] = kept[column[~is_merged]]
            out[is_merged, j] = merged[rng.integers(0, merged.size, int(is_merged.sum()))]
        return out
