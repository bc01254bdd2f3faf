"""The public domain of a table: per column, its categories or its numeric bounds and bins.

A :class:`Domain` is declared by the caller (or read from a public JSON schema), never read from
the data. It turns records into integer codes, one per column, by a public rule that never fails
on a record's value: a value outside the domain (NaN, None, an unknown category, text that is not
a number) goes to the column's declared bin. Synthetic codes decode back to values (a numeric
column's value is drawn uniformly within its bin).
"""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Union

import numpy as np

from dpcore import _validation as check

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike

__all__ = ["Categorical", "Domain", "MAX_CELL_CHARS", "MAX_COLUMN_CODES", "Numeric"]

#: A text cell longer than this is not parsed as a number (it is outside the domain): one public
#: rule for every cell, so no record can make the encoder slow or raise.
MAX_CELL_CHARS = 64
#: Most codes one column may have (its categories or bins, plus the missing code).
MAX_COLUMN_CODES = 2**16


def _text(value) -> str:
    """How a value is compared with a category as text (a CSV cell, or a JSON category)."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))  # 1.0 in a float column matches the category 1 or "1"
    return str(value)


@dataclass(frozen=True, eq=False)
class Categorical:
    """A categorical column: its public list of categories.

    Parameters
    ----------
    categories : sequence
        The distinct public categories (strings or numbers), at least one. A value matches a
        category when it equals it or when their texts agree (``str``, with whole floats
        written as integers: ``1.0`` matches ``1`` and ``"1"``), so a CSV cell ``"1"`` matches
        the category ``1``.
    other : category or None, default=None
        Where values outside the categories go (NaN, None, unknown categories). None: an extra
        *missing* code after the categories, decoded as None. A category: those values are
        counted as that category (e.g. ``"other"``).
    """

    categories: tuple
    other: object = None

    def __init__(self, categories: Iterable[Any], other: Any = None):
        if isinstance(categories, (str, bytes)):
            raise TypeError(f"categories must be a sequence of categories, got the text "
                            f"{categories!r}")
        try:
            cats = tuple(categories)
        except TypeError:
            raise TypeError(f"categories must be a sequence, got "
                            f"{type(categories).__name__}") from None
        if not cats:
            raise ValueError("categories must hold at least one category")
        texts = [_text(c) for c in cats]
        if len(set(texts)) != len(texts):
            raise ValueError("categories must be distinct (also as text: 1 and '1' are the same "
                             "category)")
        if other is not None and _text(other) not in texts:
            raise ValueError(f"other must be None or one of the categories, got {other!r}")
        if len(cats) + (other is None) > MAX_COLUMN_CODES:
            raise ValueError(f"a column may have at most {MAX_COLUMN_CODES} codes, got "
                             f"{len(cats)} categories")
        object.__setattr__(self, "categories", cats)
        object.__setattr__(self, "other", other)

    @property
    def size(self) -> int:
        """Number of codes: the categories, plus the missing code when ``other`` is None."""
        return len(self.categories) + (self.other is None)

    @property
    def outside_code(self) -> int:
        """The code every value outside the categories gets."""
        if self.other is None:
            return len(self.categories)
        return [_text(c) for c in self.categories].index(_text(self.other))

    def encode(self, values: Iterable[Any]) -> np.ndarray:
        """Codes (int64) of a 1-d array of values; never raises for a value."""
        lookup = {}
        for code, cat in enumerate(self.categories):
            lookup[_text(cat)] = code
        outside = self.outside_code
        return _map_values(values, lambda u: outside if _missing(u) else
                           lookup.get(_text(u), outside), np.int64)

    def decode(self, codes: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Values (an object array) of codes; the missing code decodes as None."""
        table = np.array(list(self.categories) + [None] * (self.other is None), dtype=object)
        return table[np.asarray(codes, dtype=np.int64)]

    def to_json(self) -> dict:
        out = {"type": "categorical", "categories": [_jsonable(c) for c in self.categories]}
        if self.other is not None:
            out["other"] = _jsonable(self.other)
        return out


def _map_values(values, rule, dtype) -> np.ndarray:
    """``rule`` applied to every value of a 1-d array, once per distinct value: through
    ``np.unique`` when the values compare, else a memo of the hashable ones."""
    arr = _column(values)
    if arr.dtype.kind in "biufUS":  # comparable: map the distinct values only
        uniques, inverse = np.unique(arr, return_inverse=True)
        mapped = np.array([rule(u.item()) for u in uniques], dtype=dtype)
        return mapped[inverse.reshape(-1)] if arr.size else np.zeros(0, dtype)
    memo: dict = {}

    def once(value):
        try:
            return memo[value]
        except KeyError:
            out = memo[value] = rule(value)
            return out
        except TypeError:  # unhashable (a list, an array): mapped directly
            return rule(value)

    return np.fromiter(map(once, arr), dtype=dtype, count=arr.size)


def _missing(value) -> bool:
    if value is None:
        return True
    try:
        return bool(isinstance(value, (float, np.floating)) and math.isnan(value))
    except TypeError:  # pragma: no cover
        return False


def _jsonable(value):
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True, eq=False)
class Numeric:
    """A numeric column: public bounds and equal-width bins.

    Parameters
    ----------
    lower, upper : float
        Public bounds, lower < upper. Numbers outside are clipped to them (they count in the
        first or last bin); so are -inf and +inf.
    bins : int, default=10
        Number of equal-width bins on [lower, upper] (1 to 2**16 - 1): bin k is
        [edges[k], edges[k + 1]), the last one closed.
    integer : bool, default=False
        The column holds integers: decoding draws an integer uniformly among those in the bin
        (instead of a real number uniformly within it).
    fill : float or None, default=None
        Where values that are not numbers go (NaN, None, text that does not parse as a number,
        or longer than ``MAX_CELL_CHARS``). None: an extra *missing* code after the bins,
        decoded as NaN. A number: those values are counted as that number.
    """

    lower: float
    upper: float
    bins: int = 10
    integer: bool = False
    fill: float | None = None

    def __init__(self, lower: float, upper: float, bins: int = 10, integer: bool = False,
                 fill: float | None = None):
        lower, upper = check.bounds_pair((lower, upper), "(lower, upper)")
        bins = check.integer(bins, "bins", minimum=1, maximum=MAX_COLUMN_CODES - 1)
        if not isinstance(integer, (bool, np.bool_)):
            raise TypeError(f"integer must be True or False, got {integer!r}")
        if fill is not None:
            fill = check.real(fill, "fill")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "bins", bins)
        object.__setattr__(self, "integer", bool(integer))
        object.__setattr__(self, "fill", fill)

    @property
    def size(self) -> int:
        """Number of codes: the bins, plus the missing code when ``fill`` is None."""
        return self.bins + (self.fill is None)

    @property
    def edges(self) -> np.ndarray:
        """The bins + 1 edges (float64), lower and upper exactly at the ends."""
        e = np.linspace(self.lower, self.upper, self.bins + 1)
        e[0], e[-1] = self.lower, self.upper
        return e

    def numbers(self, values: Iterable[Any]) -> np.ndarray:
        """The values as float64, NaN where a value is not a number (by the public rule)."""
        arr = _column(values)
        if arr.dtype.kind in "biuf":
            return arr.astype(np.float64).reshape(-1)
        return _map_values(arr, _parse_number, np.float64)

    def encode(self, values: Iterable[Any]) -> np.ndarray:
        """Codes (int64) of a 1-d array of values; never raises for a value."""
        x = self.numbers(values)
        missing = np.isnan(x)
        if self.fill is not None:
            x = np.where(missing, self.fill, x)
        x = np.clip(x, self.lower, self.upper)
        codes = np.searchsorted(self.edges[1:-1], np.nan_to_num(x, nan=self.lower),
                                side="right").astype(np.int64)
        if self.fill is None:
            codes[missing] = self.bins
        return codes

    def decode(self, codes: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Values (float64) of codes: uniform within the bin (an integer uniformly among those
        in the bin when ``integer``); the missing code decodes as NaN."""
        codes = np.asarray(codes, dtype=np.int64)
        edges = self.edges
        in_bin = codes < self.bins
        k = np.where(in_bin, codes, 0)
        if self.integer:
            # the integers whose code is k: ceil(edges[k]) .. the last one below edges[k + 1]
            # (the last bin includes upper); a bin holding none decodes to its rounded middle
            first = np.ceil(edges[:-1])
            last = np.ceil(edges[1:]) - 1.0
            last[-1] = math.floor(self.upper)
            empty = last < first
            middle = np.round((edges[:-1] + edges[1:]) / 2.0)
            first[empty], last[empty] = middle[empty], middle[empty]
            span = (last - first + 1.0)[k]
            values = first[k] + np.floor(rng.random(codes.size) * span)
            values = np.minimum(values, last[k])
        else:
            left, width = edges[k], (edges[k + 1] - edges[k])
            values = np.minimum(left + rng.random(codes.size) * width, edges[k + 1])
        return np.where(in_bin, values, np.nan)

    def to_json(self) -> dict:
        out = {"type": "numeric", "lower": self.lower, "upper": self.upper, "bins": self.bins}
        if self.integer:
            out["integer"] = True
        if self.fill is not None:
            out["fill"] = self.fill
        return out


#: A column of a Domain.
Column = Union[Categorical, Numeric]


def _parse_number(value) -> float:
    """A number, or NaN: None, NaN, text that does not parse or is longer than MAX_CELL_CHARS."""
    if value is None:
        return math.nan
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if len(text) > MAX_CELL_CHARS:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _column(values) -> np.ndarray:
    """A column as a 1-d array, its values unchanged: numpy would turn a list mixing text and
    numbers into text (2.0 -> "2.0"), so such a list becomes an object array."""
    if isinstance(values, np.ndarray):
        return values.reshape(-1) if values.ndim <= 1 else _objects(list(values))
    items = list(values)
    try:
        arr = np.asarray(items)
    except (ValueError, TypeError):
        return _objects(items)
    if arr.ndim != 1 or (arr.dtype.kind in "US" and not all(
            isinstance(v, (str, bytes)) for v in items)) or arr.dtype.kind not in "biufUSO":
        return _objects(items)
    return arr


def _objects(items) -> np.ndarray:
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr


class Domain:
    """The public domain of a table: an ordered mapping column name -> column.

    Parameters
    ----------
    columns : mapping of str to Categorical or Numeric
        The columns in order. Each column's codes are 0 .. size - 1.

    Notes
    -----
    The domain decides the sensitivity of every marginal (one record is one cell of each) and
    the cells a synthetic data set can hold; it must be public, fixed before looking at the
    data. Nothing in this class reads a domain from data: :meth:`encode` maps every value
    somewhere by the columns' public rules.

    Examples
    --------
    >>> from dpcore.synth import Categorical, Domain, Numeric
    >>> dom = Domain({"age": Numeric(0, 100, bins=10, integer=True),
    ...               "sex": Categorical(["F", "M"])})
    >>> dom.shape
    (11, 3)
    >>> dom.encode({"age": [35, None, 250], "sex": ["M", "F", "X"]}).tolist()
    [[3, 1], [10, 0], [9, 2]]
    """

    columns: dict[str, Column]

    def __init__(self, columns: Mapping[str, Column] | Domain):
        if isinstance(columns, Domain):
            columns = columns.columns
        try:
            items = list(columns.items())
        except AttributeError:
            raise TypeError("columns must be a mapping of column name -> Categorical or "
                            f"Numeric, got {type(columns).__name__}") from None
        if not items:
            raise ValueError("a domain needs at least one column")
        for name, col in items:
            if not isinstance(name, str):
                raise TypeError(f"column names must be strings, got {name!r}")
            if not isinstance(col, (Categorical, Numeric)):
                raise TypeError(f"column {name!r} must be a Categorical or a Numeric, got "
                                f"{type(col).__name__}")
        self.columns = dict(items)

    # -- structure ---------------------------------------------------------------------------

    @property
    def names(self) -> tuple:
        return tuple(self.columns)

    @property
    def shape(self) -> tuple:
        """Number of codes per column."""
        return tuple(c.size for c in self.columns.values())

    def __len__(self):
        return len(self.columns)

    def __getitem__(self, name):
        return self.columns[name]

    def __eq__(self, other):
        return isinstance(other, Domain) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self):
        inner = ", ".join(f"{n!r}: {c!r}" for n, c in self.columns.items())
        return f"Domain({{{inner}}})"

    def index(self, name: str) -> int:
        """Position of the column ``name``."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"the domain has no column {name!r}") from None

    # -- schema files ------------------------------------------------------------------------

    @classmethod
    def from_json(cls, schema: str | os.PathLike | dict) -> Domain:
        """A domain from a public schema: a JSON file path, a JSON text, or its parsed dict.

        The schema is ``{"columns": [{"name": ..., "type": "categorical", "categories": [...],
        "other": ...}, {"name": ..., "type": "numeric", "lower": ..., "upper": ..., "bins": ...,
        "integer": ..., "fill": ...}]}`` (``other``, ``bins``, ``integer`` and ``fill``
        optional).
        """
        if isinstance(schema, (str, os.PathLike)):
            text = str(schema)
            if isinstance(schema, os.PathLike) or not text.lstrip().startswith("{"):
                with open(schema) as handle:
                    schema = json.load(handle)
            else:
                schema = json.loads(text)
        if not isinstance(schema, dict) or not isinstance(schema.get("columns"), list):
            raise ValueError('a schema must be {"columns": [ ... ]}')
        columns: dict[str, Categorical | Numeric] = {}
        for i, spec in enumerate(schema["columns"]):
            if not isinstance(spec, dict) or "name" not in spec or "type" not in spec:
                raise ValueError(f"schema column {i} must be an object with 'name' and 'type'")
            spec = dict(spec)
            name, kind = spec.pop("name"), spec.pop("type")
            if name in columns:
                raise ValueError(f"the schema repeats the column {name!r}")
            try:
                if kind == "categorical":
                    columns[name] = Categorical(**spec)
                elif kind == "numeric":
                    columns[name] = Numeric(**spec)
                else:
                    raise ValueError(f"type must be 'categorical' or 'numeric', got {kind!r}")
            except TypeError as exc:
                raise ValueError(f"schema column {name!r}: {exc}") from None
        return cls(columns)

    def to_json(self) -> dict:
        """The schema (a dict that :meth:`from_json` reads back; ``json.dump`` it to save)."""
        return {"columns": [{"name": n, **c.to_json()} for n, c in self.columns.items()]}

    # -- records <-> codes -------------------------------------------------------------------

    def encode(self, data: Any) -> np.ndarray:
        """Codes of the records: an int64 array of shape (records, columns).

        Parameters
        ----------
        data : pandas DataFrame, mapping of column name -> values, 2-d array, or CSV path
            A DataFrame or a mapping is read by column name (extra columns are ignored); a 2-d
            array has the domain's columns in order; a CSV file (a path) has a header row naming
            them. A missing column is an error (the schema is public); a value never is: every
            value goes to a code by its column's public rule.
        """
        columns = self._columns_of(data)
        if not columns:
            return np.zeros((0, len(self)), dtype=np.int64)
        sizes = {len(v) for v in columns}
        if len(sizes) != 1:
            raise ValueError("data columns must have the same length")
        if next(iter(sizes)) == 0:
            return np.zeros((0, len(self)), dtype=np.int64)
        return np.column_stack([col.encode(values) for col, values
                                in zip(self.columns.values(), columns)])

    def _columns_of(self, data):
        if isinstance(data, (str, os.PathLike)):
            return self._read_csv(data)
        if hasattr(data, "columns") and hasattr(data, "__getitem__") and not isinstance(
                data, np.ndarray):  # a pandas DataFrame
            present = set(map(str, data.columns))
            missing = [n for n in self.names if n not in present]
            if missing:
                raise ValueError(f"data lacks the domain's columns {missing}")
            return [np.asarray(data[n].to_numpy()) for n in self.names]
        if isinstance(data, dict):
            missing = [n for n in self.names if n not in data]
            if missing:
                raise ValueError(f"data lacks the domain's columns {missing}")
            return [_column(data[n]) for n in self.names]
        arr = np.asarray(data, dtype=object) if not isinstance(data, np.ndarray) else data
        if arr.ndim != 2 or arr.shape[1] != len(self):
            raise ValueError(f"data must be a 2-d array with {len(self)} columns (the domain's, "
                             f"in order), got shape {arr.shape}")
        return [arr[:, j] for j in range(arr.shape[1])]

    def _read_csv(self, path):
        with open(path, newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                return [np.zeros(0, dtype=object) for _ in self.names]
            missing = [n for n in self.names if n not in header]
            if missing:
                raise ValueError(f"the CSV file lacks the domain's columns {missing}")
            where = [header.index(n) for n in self.names]
            width = len(header)
            # a short row's absent cells are None (outside the domain), a long row's extras are
            # ignored: the rule is public, no row raises
            rows = [row + [None] * (width - len(row)) if len(row) < width else row
                    for row in reader]
        if not rows:
            return [np.zeros(0, dtype=object) for _ in self.names]
        table = np.array([[row[j] for j in where] for row in rows], dtype=object)
        return [table[:, j] for j in range(len(where))]

    def decode(self, codes: ArrayLike, *, random_state: RandomStateLike = None,
               output: str = "frame") -> Any:
        """Values of synthetic codes (post-processing: costs nothing).

        Parameters
        ----------
        codes : array_like of int, shape (records, columns)
        random_state : None, int, numpy Generator or BitGenerator, optional
            Draws the numeric values within their bins. None: dpcore's secure generator.
        output : {"frame", "dict"}, default="frame"
            A pandas DataFrame (needs pandas), or a dict column name -> array.
        """
        from dpcore.random import check_random_state

        if output not in ("frame", "dict"):
            raise ValueError(f"output must be 'frame' or 'dict', got {output!r}")
        codes = check.real_array(codes, "codes")
        if codes.ndim != 2 or codes.shape[1] != len(self) or codes.dtype.kind not in "iu":
            raise ValueError(f"codes must be a 2-d integer array with {len(self)} columns")
        if codes.size and (codes.min() < 0 or np.any(codes.max(axis=0) >= np.array(self.shape))):
            raise ValueError("codes must lie in 0 .. size - 1 for each column")
        rng = check_random_state(random_state)
        out = {n: c.decode(codes[:, j], rng) for j, (n, c) in enumerate(self.columns.items())}
        if output == "dict":
            return out
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("output='frame' needs pandas; use output='dict'") from None
        return pd.DataFrame(out)
