"""dpcore: differentially private releases from the command line.

``dpcore demo`` releases a few statistics of the bundled (synthetic) demo data under one privacy
budget and prints what it released and the privacy spent; ``dpcore graph`` releases a synthetic
graph from an edge list (PrivHRG, edge-DP); ``dpcore publish`` releases a consistent
hierarchical histogram of one CSV column with range counts; ``dpcore synth`` writes synthetic
records of a CSV table (MST over a public JSON schema). Only released (noisy) values are printed;
no private intermediate value is ever shown.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from importlib import resources
from typing import Any

import numpy as np

import dpcore
from dpcore import _validation as check
from dpcore.accounting import Accountant

DEMO_BOUNDS = {"age": (18.0, 100.0), "hours_per_week": (0.0, 100.0), "income": (0.0, 250000.0)}
# The categories are public, fixed before seeing the data: taking them from the data would
# reveal that a rare category occurs (a record's presence). Anything else counts as "other".
DEMO_SECTORS = ("private", "public", "non-profit", "self-employed", "other")


class CommandError(SystemExit):
    """A one-line error of a subcommand: printed to stderr by :func:`_fail`, exit status 2 (as
    argparse's usage errors), never a traceback. ``str()`` is the message."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _fail(command, message):
    """Print ``dpcore <command>: <message>`` (one line) to stderr and exit with status 2."""
    line = f"dpcore {command}: {message}".replace("\n", " ")
    print(line, file=sys.stderr)
    raise CommandError(line)


def _public_parameters(args):
    """Check the public numeric options before anything is read, naming the option."""
    args.epsilon = check.privacy_loss(check.positive(args.epsilon, "--epsilon"), "--epsilon",
                                      check.MAX_EPSILON)
    if getattr(args, "delta", None) is not None:
        args.delta = check.probability(args.delta, "--delta", open_low=False)
    if getattr(args, "epsilon_split", None) is not None:
        args.epsilon_split = check.probability(args.epsilon_split, "--epsilon-split")
    if getattr(args, "steps", None) is not None:
        args.steps = check.integer(args.steps, "--steps", minimum=0)


def _read_header(path):
    """The column names of a CSV or Parquet file (the public schema), read before any row; an
    empty file has none."""
    if str(path).endswith((".parquet", ".pq")):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ValueError("reading Parquet needs pyarrow (pip install pyarrow)") from None
        return list(pq.read_schema(path).names)
    with open(path, newline="") as handle:
        return next(csv.reader(handle), None)


#: ``dpcore publish``: a cell longer than this, or not a finite number, counts as outside the
#: range (one public rule for every cell: no outcome is decided by a record's value).
MAX_CELL_CHARS = 64


def _cell_number(cell):
    """A cell's value under the public rule: a finite number, else NaN (outside every range)."""
    if cell is None:
        return math.nan
    if not isinstance(cell, str):
        cell = str(cell)
    if len(cell) > MAX_CELL_CHARS:
        return math.nan
    try:
        value = float(cell)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def _read_rows(path):
    """Rows of a CSV file, or of a Parquet file when pyarrow is installed, as dicts."""
    if str(path).endswith((".parquet", ".pq")):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ValueError("reading Parquet needs pyarrow (pip install pyarrow)") from None
        return pq.read_table(path).to_pylist()
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _load_demo(path=None):
    if path is None:
        with resources.as_file(resources.files("dpcore") / "data" / "demo.csv") as bundled, \
                open(bundled, newline="") as handle:
            rows = list(csv.DictReader(handle))
    else:
        rows = _read_rows(path)
    missing = {"age", "hours_per_week", "income", "sector"} - set(rows[0] if rows else {})
    if missing:
        raise ValueError(f"the data file lacks columns {sorted(missing)}")
    columns = {}
    for name in DEMO_BOUNDS:
        try:
            columns[name] = np.array([float(r[name]) for r in rows])
        except (TypeError, ValueError):  # the message would quote a private cell: not kept
            raise ValueError(f"data column {name!r} holds a value that is not a number") from None
        # checked here, before anything is charged (a NaN would otherwise stop the demo midway,
        # after the first releases were paid for); +-inf is clipped to the public bounds
        if np.isnan(columns[name]).any():
            raise ValueError(f"data column {name!r} holds a value that is not a number (NaN)")
    sectors = [str(r["sector"]) for r in rows]
    columns["sector"] = np.array([x if x in DEMO_SECTORS else "other" for x in sectors])
    return columns


def run_demo(epsilon: float = 1.0, delta: float = 1e-6, data: str | None = None,
             random_state: Any = None) -> dict[str, Any]:
    """Release the demo statistics; returns a dict of releases and the privacy spent.

    Budget split (add/remove neighbours, one record per person): 20% for the record count,
    30% for the counts per sector (a public list of sectors; the bins are disjoint, so the vector
    of counts has L1 sensitivity 1), 15% each for the clipped sums of age and hours (discrete
    Laplace), 15% and half of delta for the clipped income sum (discrete Gaussian); 5% is left
    unspent as headroom. Means are post-processing of a sum and the noisy count.
    """
    epsilon = check.privacy_loss(check.positive(epsilon, "--epsilon"), "--epsilon",
                                 check.MAX_EPSILON)
    delta = check.probability(delta, "--delta", open_low=False)
    cols = _load_demo(data)
    acc = Accountant(epsilon, delta)
    releases: dict[str, Any] = {}
    # One generator for every release: a seed must not restart the same stream for each.
    kw: dict[str, Any] = {"random_state": dpcore.random.check_random_state(random_state), "accountant": acc}
    releases["count"] = float(dpcore.laplace(len(cols["age"]), sensitivity=1.0, epsilon=0.2 * epsilon, **kw))
    sectors = DEMO_SECTORS
    counts = np.array([np.sum(cols["sector"] == s) for s in sectors], dtype=float)
    noisy_counts = np.asarray(dpcore.laplace(counts, sensitivity=1.0, epsilon=0.3 * epsilon, **kw))
    releases["sector_counts"] = dict(zip(sectors, map(float, noisy_counts)))
    noisy_count = max(releases["count"], 1.0)
    for name in ("age", "hours_per_week"):
        lo, hi = DEMO_BOUNDS[name]
        total = np.clip(cols[name], lo, hi).sum()
        noisy = dpcore.laplace(total, sensitivity=max(abs(lo), abs(hi)), epsilon=0.15 * epsilon, **kw)
        releases[f"mean_{name}"] = float(noisy) / noisy_count  # post-processing of two releases
    lo, hi = DEMO_BOUNDS["income"]
    income_sum = np.clip(cols["income"], lo, hi).sum()
    releases["mean_income"] = float(
        dpcore.gaussian(income_sum, sensitivity=hi, epsilon=0.15 * epsilon, delta=delta / 2, **kw)
    ) / noisy_count
    spent_eps, spent_delta = acc.spent
    return {
        "releases": releases,
        "privacy": {
            "budget": {"epsilon": epsilon, "delta": delta},
            "spent": {"epsilon": spent_eps, "delta": spent_delta},
            "neighbouring": "add/remove one record",
        },
    }


def _print_demo(result):
    rel = result["releases"]
    print("dpcore demo: differentially private statistics of the bundled demo data")
    print(f"  records (noisy count)      {rel['count']:12.1f}")
    for sector, value in rel["sector_counts"].items():
        print(f"  records in {sector:<15} {value:12.1f}")
    print(f"  mean age                   {rel['mean_age']:12.2f}")
    print(f"  mean hours per week        {rel['mean_hours_per_week']:12.2f}")
    print(f"  mean income                {rel['mean_income']:12.2f}")
    p = result["privacy"]
    print(
        f"privacy spent: epsilon = {p['spent']['epsilon']:.4g}, delta = {p['spent']['delta']:.3g} "
        f"(budget epsilon = {p['budget']['epsilon']:.4g}, delta = {p['budget']['delta']:.3g}; "
        f"{p['neighbouring']})"
    )


def _read_node_list(path):
    """The public vertex labels, one per line (blank lines and '#' comments skipped)."""
    with open(path) as handle:
        labels = [line.strip() for line in handle]
    labels = [x for x in labels if x and not x.startswith("#")]
    if len(set(labels)) != len(labels):
        raise ValueError("--node-list repeats a label")
    return labels


def _read_edge_list(path, n_nodes=None, labels=None):
    """An (m, 2) int64 edge array from a text edge list: one edge per line, two vertex labels
    separated by whitespace or a comma; blank lines and lines starting with '#' are skipped.
    The vertex set is public and given apart from the edges: the integers 0..n_nodes-1, or the
    ``labels`` of a node list. Errors never quote the file's contents (they are private)."""
    index = None if labels is None else {label: i for i, label in enumerate(labels)}
    flat = []
    with (sys.stdin if path == "-" else open(path)) as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.replace(",", " ").split()
            if len(parts) < 2:
                raise ValueError("the edge list has a line without two vertex labels")
            for token in parts[:2]:
                if index is not None:
                    if token not in index:
                        raise ValueError("the edge list names a vertex that is not in --node-list")
                    flat.append(index[token])
                    continue
                try:
                    flat.append(int(token))
                except ValueError:
                    raise ValueError("with --nodes the vertex labels must be the integers "
                                     "0..N-1; use --node-list for other labels") from None
    edges = np.array(flat, dtype=np.int64).reshape(-1, 2)
    if index is None and edges.size and (edges.min() < 0 or edges.max() >= n_nodes):
        raise ValueError("the edge list names a vertex outside 0..N-1 (N = --nodes)")
    return edges


def run_graph(args: argparse.Namespace) -> dict[str, Any]:
    """Release a synthetic graph from an edge list with PrivHRG (edge differential privacy)."""
    from dpcore.graph import check_n_nodes, release_hrg

    if args.node_list is not None:
        labels = _read_node_list(args.node_list)
        n_nodes = check_n_nodes(len(labels), "the number of labels in --node-list")
    else:
        # public: checked (range, MAX_NODES, memory) before the private edge list is read
        labels, n_nodes = None, check_n_nodes(args.nodes, "--nodes")
    edges = _read_edge_list(args.input, n_nodes, labels)
    rel = release_hrg(
        edges, n_nodes=n_nodes, epsilon=args.epsilon, epsilon_split=args.epsilon_split,
        n_steps=args.steps, simplify=args.simplify, random_state=args.seed,
        progress=not (args.quiet or args.json),  # JSON: nothing else on its stream
    )
    out = sys.stdout if args.output == "-" else open(args.output, "w")
    try:
        for u, v in rel.edges:
            if labels is None:
                out.write(f"{u} {v}\n")
            else:
                out.write(f"{labels[u]} {labels[v]}\n")
    finally:
        if out is not sys.stdout:
            out.close()
    counts = rel.dendrogram.edge_counts
    summary = {
        "nodes": n_nodes,
        "synthetic_edges": int(rel.edges.shape[0]),
        "noisy_edge_count": int(np.sum(counts)),
        "mcmc_steps": rel.n_steps,
        "temperature": rel.temperature,
        "privacy": {
            "epsilon": rel.epsilon,
            "epsilon_dendrogram": rel.epsilon_dendrogram,
            "epsilon_counts": rel.epsilon_counts,
            "neighbouring": "edge-DP: graphs on the same public vertex set differing in one edge",
            "guarantee": rel.guarantee,
        },
    }
    stream = sys.stderr if args.output == "-" else sys.stdout
    if args.json:
        json.dump(summary, stream, indent=2)
        print(file=stream)
    else:
        print(f"dpcore graph: synthetic graph written to {args.output}", file=stream)
        print(f"  vertices                   {summary['nodes']:12d}", file=stream)
        print(f"  synthetic edges            {summary['synthetic_edges']:12d}", file=stream)
        print(f"  noisy edge count           {summary['noisy_edge_count']:12d}", file=stream)
        print(f"  MCMC steps                 {summary['mcmc_steps']:12d}", file=stream)
        print(f"privacy spent: epsilon = {rel.epsilon:.4g} (dendrogram {rel.epsilon_dendrogram:.4g}, "
              f"counts {rel.epsilon_counts:.4g})", file=stream)
        print(f"guarantee: {rel.guarantee}", file=stream)
    return summary


def _parse_ranges(text, n_bins):
    """Public range queries "lo:hi,lo:hi" (half-open bin indices), checked before any data."""
    ranges = []
    for part in text.split(","):
        try:
            lo, hi = (int(v) for v in part.split(":"))
        except ValueError:
            raise ValueError(f"--ranges must be lo:hi pairs of bin indices separated by commas, "
                             f"got {part!r}") from None
        if not 0 <= lo < hi <= n_bins:
            raise ValueError(f"--ranges: {lo}:{hi} is not within 0 <= lo < hi <= --bins ({n_bins})")
        ranges.append((lo, hi))
    return ranges


def run_publish(args: argparse.Namespace) -> dict[str, Any]:
    """Release a consistent hierarchical histogram of one CSV column (with range counts)."""
    from dpcore.publish import hierarchical_histogram

    bins = check.integer(args.bins, "--bins", minimum=1)
    lower, upper = check.bounds_pair(tuple(args.range), "--range")
    ranges = _parse_ranges(args.ranges, bins) if args.ranges else []
    header = _read_header(args.input)
    if header is not None and args.column not in header:
        raise ValueError(f"the input has no column {args.column!r}")
    rows = _read_rows(args.input)  # an empty file is released like any other (n = 0 is private)
    values = np.array([_cell_number(row.get(args.column)) for row in rows], dtype=np.float64)
    values = values[~np.isnan(values)]  # outside every range: not counted, as out-of-range values
    acc = Accountant(args.epsilon)
    rel = hierarchical_histogram(values, bins=bins, range=(lower, upper), epsilon=args.epsilon,
                                 branching=args.branching, random_state=args.seed,
                                 accountant=acc)
    counts = rel.nonnegative_counts() if args.nonnegative else rel.counts
    result = {
        "column": args.column,
        "edges": [float(e) for e in rel.edges],
        "counts": [float(c) for c in counts],
        "ranges": [{"bins": [lo, hi], "count": float(rel.range_count(lo, hi)),
                    "standard_error": float(np.sqrt(rel.range_variance(lo, hi)))}
                   for lo, hi in ranges],
        "privacy": {
            "epsilon": acc.spent[0],
            "neighbouring": "add/remove one record (one CSV row)",
            "guarantee": f"epsilon-DP, epsilon = {acc.spent[0]:.4g}: a {rel.levels}-level "
                         f"{rel.branching}-ary tree of exact discrete Laplace counts",
        },
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return result
    print(f"dpcore publish: {args.column}, {bins} bins on [{lower:g}, {upper:g}), "
          f"{rel.levels}-level tree (branching {rel.branching})")
    print(f"  {'bin':>14}  {'count':>12}")
    for k in range(bins):
        print(f"  [{rel.edges[k]:>6.4g}, {rel.edges[k + 1]:<6.4g})  {counts[k]:12.1f}")
    for q in result["ranges"]:
        lo, hi = q["bins"]
        print(f"  bins {lo}:{hi}: {q['count']:.1f} (standard error {q['standard_error']:.2f})")
    print(f"privacy spent: epsilon = {acc.spent[0]:.4g} ({result['privacy']['neighbouring']})")
    return result


def run_synth(args: argparse.Namespace) -> dict[str, Any]:
    """Write synthetic records of a CSV table (MST or AIM on a public schema; rho-zCDP or
    epsilon-DP)."""
    from dpcore.synth import AIM, MST, Domain

    budget = {"rho": args.rho, "epsilon": args.epsilon, "delta": args.delta}
    for option, value in budget.items():  # the options' names in messages, before any read
        if value is not None:
            check.positive(value, f"--{option}")
    if (args.rho is None) == (args.epsilon is None):
        raise ValueError("give exactly one of --rho (zCDP) and --epsilon (with optional --delta)")
    if args.n is not None:
        check.integer(args.n, "-n", minimum=0)
    if args.max_time is not None:
        if args.method != "aim":
            raise ValueError("--max-time applies to --method aim only")
        check.positive(args.max_time, "--max-time")
    domain = Domain.from_json(args.schema)  # public: read and checked before the data
    header = _read_header(args.input)
    missing = [c for c in domain.names if header is None or c not in header]
    if missing:
        raise ValueError(f"the input has no column(s) {missing} of the schema")
    extra = {"max_time": args.max_time} if args.method == "aim" else {}
    model: Any = (AIM if args.method == "aim" else MST)(domain=domain, random_state=args.seed,
                                                    **budget, **extra)
    cost = model.cost
    model.fit(args.input)
    records = model.sample(args.n, output="dict")
    integer = {n for n, c in domain.columns.items() if getattr(c, "integer", False)}

    def cell(name, value):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        return str(int(value)) if name in integer else str(value)

    out = sys.stdout if args.output == "-" else open(args.output, "w", newline="")
    try:
        writer = csv.writer(out)
        writer.writerow(domain.names)
        columns = [records[n] for n in domain.names]
        for i in range(len(columns[0]) if columns else 0):
            writer.writerow([cell(n, c[i]) for n, c in zip(domain.names, columns)])
    finally:
        if out is not sys.stdout:
            out.close()
    guarantee = (f"rho-zCDP, rho = {cost.rho:.4g}" if cost.rho is not None else
                 f"epsilon-DP, epsilon = {cost.epsilon:.4g}" if not cost.delta else
                 f"(epsilon, delta)-DP, epsilon = {cost.epsilon:.4g}, delta = {cost.delta:.3g}")
    summary = {
        "synthetic_records": len(records[domain.names[0]]),
        "noisy_record_count": float(model.n_records_),
        "method": args.method,
        "privacy": {"rho": cost.rho, "epsilon": cost.epsilon, "delta": cost.delta,
                    "neighbouring": "add/remove one record (one CSV row)",
                    "guarantee": guarantee + f" ({args.method.upper()}; the schema is public)"},
    }
    if args.method == "aim":
        summary["selected_marginals"] = [[str(c) for c in m] for m in model.selected_]
    else:
        summary["tree_edges"] = [list(e) for e in model.edges_]
    stream = sys.stderr if args.output == "-" else sys.stdout
    if args.json:
        json.dump(summary, stream, indent=2)
        print(file=stream)
    else:
        print(f"dpcore synth: {summary['synthetic_records']} synthetic records written to "
              f"{args.output} (noisy record count {model.n_records_:.1f})", file=stream)
        if args.method == "aim":
            print("  marginals selected: " + ", ".join(
                "-".join(str(c) for c in m) for m in model.selected_), file=stream)
        else:
            print("  tree: " + ", ".join(f"{a}-{b}" for a, b in model.edges_), file=stream)
        print(f"privacy spent: {guarantee} (add/remove one record)", file=stream)
    return summary


def _first_line(doc: str | None) -> str:
    return doc.splitlines()[0] if doc else ""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpcore", description=_first_line(__doc__))
    parser.add_argument("--version", action="version", version=f"dpcore {dpcore.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="release statistics of the bundled demo data",
                          description=_first_line(run_demo.__doc__))
    demo.add_argument("--epsilon", type=float, default=1.0, help="total epsilon budget (default 1)")
    demo.add_argument("--delta", type=float, default=1e-6, help="total delta budget (default 1e-6)")
    demo.add_argument("--data", help="CSV (or Parquet, with pyarrow) with columns age, "
                      "hours_per_week, income, sector")
    demo.add_argument("--json", action="store_true", help="machine-readable output")
    demo.add_argument("--seed", type=int, help="seed the generator (tests only; not private)")
    graph = sub.add_parser("graph", help="release a synthetic graph (PrivHRG, edge-DP)",
                           description=_first_line(run_graph.__doc__))
    graph.add_argument("input", help="edge list: two vertex labels per line ('-' for stdin)")
    graph.add_argument("-o", "--output", required=True, help="synthetic edge list ('-' for stdout)")
    graph.add_argument("--epsilon", type=float, required=True, help="total epsilon budget")
    graph.add_argument("--epsilon-split", type=float, default=0.5,
                       help="fraction of epsilon for the dendrogram (default 0.5)")
    graph.add_argument("--steps", type=int, help="MCMC steps (default 1000 per vertex)")
    vertices = graph.add_mutually_exclusive_group(required=True)
    vertices.add_argument("--nodes", type=int, help="vertex count N (labels 0..N-1); the vertex "
                          "set is public and must not be taken from the edges")
    vertices.add_argument("--node-list", help="file of the public vertex labels, one per line")
    graph.add_argument("--simplify", action="store_true", help="drop self-loops and repeated edges")
    graph.add_argument("--json", action="store_true", help="machine-readable summary, alone on "
                       "its stream (stdout, or stderr with -o -); no progress")
    graph.add_argument("--quiet", action="store_true", help="no progress on stderr")
    graph.add_argument("--seed", type=int, help="seed the generator (tests only; not private)")
    publish = sub.add_parser("publish", help="release a consistent histogram of a CSV column",
                             description=_first_line(run_publish.__doc__))
    publish.add_argument("input", help="CSV (or Parquet, with pyarrow) with a header row")
    publish.add_argument("--column", required=True, help="the numeric column to count; a cell "
                         f"that is not a finite number (or longer than {MAX_CELL_CHARS} characters) "
                         "counts as outside the range, like a number outside it: not counted")
    publish.add_argument("--range", type=float, nargs=2, required=True, metavar=("LOWER", "UPPER"),
                         help="public value range; records outside it are not counted")
    publish.add_argument("--bins", type=int, required=True, help="number of equal-width bins")
    publish.add_argument("--epsilon", type=float, required=True, help="total epsilon budget")
    publish.add_argument("--branching", type=int, default=16, help="tree branching (default 16)")
    publish.add_argument("--ranges", help="range counts to release: lo:hi bin indices "
                         "(half-open), comma separated, e.g. 0:10,10:64")
    publish.add_argument("--nonnegative", action="store_true",
                         help="non-negative counts keeping the noisy total (post-processing)")
    publish.add_argument("--json", action="store_true", help="machine-readable output")
    publish.add_argument("--seed", type=int, help="seed the generator (tests only; not private)")
    synth = sub.add_parser("synth", help="write synthetic records of a CSV table (MST, AIM)",
                           description=_first_line(run_synth.__doc__))
    synth.add_argument("input", help="CSV with a header row naming the schema's columns")
    synth.add_argument("--schema", required=True, help="public JSON schema of the columns "
                       "(categories, or numeric bounds and bins; see dpcore.synth.Domain)")
    synth.add_argument("-o", "--output", required=True, help="synthetic CSV ('-' for stdout)")
    synth.add_argument("--rho", type=float, help="zCDP budget (discrete Gaussian noise)")
    synth.add_argument("--epsilon", type=float, help="epsilon budget (pure DP without --delta)")
    synth.add_argument("--delta", type=float, help="with --epsilon: (epsilon, delta)-DP")
    synth.add_argument("-n", type=int, help="synthetic records (default: the noisy count)")
    synth.add_argument("--method", choices=("mst", "aim"), default="mst",
                       help="MST (default; fast) or AIM (adaptive workload of 2-way marginals)")
    synth.add_argument("--max-time", type=float, help="AIM: time cap in seconds on its model "
                       "fits (public; the last round then spends what is left)")
    synth.add_argument("--json", action="store_true", help="machine-readable summary")
    synth.add_argument("--seed", type=int, help="seed the generator (tests only; not private)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = args.command
    if args.seed is not None:
        print("warning: --seed makes the noise reproducible; never use it for a real release",
              file=sys.stderr)
    try:
        if command == "synth":  # its budget is --rho or --epsilon: checked by run_synth
            run_synth(args)
            return 0
        _public_parameters(args)
        if command == "demo":
            result = run_demo(args.epsilon, args.delta, args.data, args.seed)
            if args.json:
                json.dump(result, sys.stdout, indent=2)
                print()
            else:
                _print_demo(result)
        elif command == "graph":
            run_graph(args)
        else:
            run_publish(args)
    except CommandError:
        raise
    except KeyboardInterrupt:
        print(f"dpcore {command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError) as exc:
        _fail(command, exc)
    except (ArithmeticError, MemoryError) as exc:  # a last line of defence: never a traceback
        _fail(command, f"a parameter is out of the supported range ({type(exc).__name__})")
    except OSError as exc:  # a missing file, a directory: the path is the caller's own
        what = f"read --data {args.data}" if command == "demo" else f"open {exc.filename}"
        if command == "publish":
            what = f"read {args.input}"
        _fail(command, f"cannot {what}: {exc.strerror or type(exc).__name__}")
    return 0
