"""Docstring pieces shared by the publishing releases (filled in by
:func:`dpcore._docstrings.fill`): the parameters and the Privacy text every grid release of
this package states the same way.

Privacy
-------
None released and nothing charged: this module holds text only. Each of the publishing releases
that fills a piece in states its own guarantee (epsilon-DP or (epsilon, delta)-DP and the
neighbouring relation) in its Privacy section, checked by tests/test_docstrings.py.
"""
from dpcore._docstrings import RANDOM_STATE

__all__ = ["ACCOUNTANT", "CHARGED", "GRID_1D", "OUTSIDE", "RANDOM_STATE"]

#: ``x``, ``bins`` and ``range`` of the 1-d grid releases.
GRID_1D = """\
x : array_like of float
    The records (any shape; each element is one record). NaN and infinities are rejected.
bins : int or array_like of float
    Public: the number of equal-width bins over ``range``, or the increasing bin edges.
range : (float, float) or None
    Public (lower, upper); required when ``bins`` is an int (never inferred from the data)."""

#: ``outside`` of the grid releases.
OUTSIDE = """\
outside : {"drop", "clip"}, default="drop"
    Records outside the range: not counted (as numpy), or counted in the nearest edge bin
    (cell)."""

#: ``accountant`` of a release charged ``epsilon`` once.
ACCOUNTANT = """\
accountant : dpcore.Accountant, optional
    Charged ``epsilon`` before anything is drawn; if the budget would be overspent it
    raises ``BudgetExceeded`` and nothing is released."""

#: The end of the Privacy section of a pure epsilon-DP release under add/remove one record.
CHARGED = """\
Under replace-one neighbours the guarantee is 2 epsilon. Charged: ``epsilon`` (delta 0),
once."""
