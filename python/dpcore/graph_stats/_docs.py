"""Docstring pieces shared by the graph releases (filled in by
:func:`dpcore._docstrings.fill`): the graph input, the generator and accountant, the errors and
the neighbouring relation, stated once.

Privacy
-------
None released and nothing charged: this module holds text only. Each of the graph statistics that
fills a piece in states its own guarantee (epsilon-DP or (epsilon, delta)-DP and the
neighbouring relation) in its Privacy section, checked by tests/test_docstrings.py.
"""
from dpcore._docstrings import RANDOM_STATE

__all__ = ["ACCOUNTANT_EPSILON", "EDGE_DP", "GRAPH", "RAISES", "RANDOM_STATE", "SIMPLIFY",
           "ladder_parameters"]

#: ``G`` and ``n_nodes`` of every graph release.
GRAPH = """\
G : networkx.Graph or array_like of int, shape (m, 2)
    Undirected simple graph: an edge array of vertex ids in [0, n_nodes), or a networkx
    graph whose ``n_nodes`` nodes are the public vertex set (never one built from the edges:
    ``nx.Graph(edge_list)`` drops isolated vertices).
n_nodes : int
    The public number of vertices, in [3, 2**26]; checked before the edges are read."""

#: ``simplify``.
SIMPLIFY = """\
simplify : bool, default=False
    Drop self-loops and repeated edges instead of raising."""

_LADDER_OR_SMOOTH = """\
epsilon : float
    > 0 (at most ``MAX_EPSILON``) for the ladder; in [2**-20, 2**10] for "smooth".
delta : float or None, default=None
    None (or 0): pure epsilon-DP. In (0, 1) for "smooth": the probability with which the
    guarantee may fail.
method : {"ladder", "smooth"} or None, default=None
    None picks "ladder" when ``delta`` is None or 0 and "smooth" otherwise."""

#: ``accountant`` of a release charged ``epsilon`` (``.format(label=...)``).
ACCOUNTANT_EPSILON = """\
accountant : dpcore.Accountant, optional
    Charged ``epsilon`` once, under the label ``"{label}"``, after every argument is
    checked and before anything is drawn."""

_ACCOUNTANT_LADDER = """\
accountant : dpcore.Accountant, optional
    Charged once, under the label ``"{label}"``: ``epsilon`` for the ladder (an exponential
    mechanism, so with its bounded-range curve, epsilon**2/8-zCDP:
    :class:`dpcore.curves.BoundedRange`), ``(epsilon, delta)`` for "smooth"; after every
    argument is checked and before anything is drawn."""

#: The Raises section of every graph release.
RAISES = """\
Raises
------
TypeError, ValueError
    Invalid arguments (naming the parameter; never quoting the edges or their number).
BudgetExceeded
    The accountant cannot afford the charge; nothing is drawn."""

#: The neighbouring relation of the edge-DP counts.
EDGE_DP = """\
Edge-DP: neighbours are graphs on the same public vertex set ``0..n_nodes-1`` differing in
one edge. The vertex count is public; this is not node-DP."""


def ladder_parameters(label: str) -> str:
    """``epsilon``, ``delta``, ``method``, ``simplify``, ``random_state`` and ``accountant``
    (charged under ``label``) of the ladder / smooth-sensitivity counts."""
    return "\n".join([_LADDER_OR_SMOOTH, SIMPLIFY, RANDOM_STATE,
                      _ACCOUNTANT_LADDER.format(label=label)])
