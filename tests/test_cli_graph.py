"""The `dpcore graph` subcommand (PrivHRG on an edge list)."""
import json

import numpy as np
import pytest

from dpcore.cli import _read_edge_list, main


@pytest.fixture
def ring(tmp_path):
    path = tmp_path / "ring.txt"
    lines = ["# a 30-cycle with chords", ""] + [f"{i} {(i + 1) % 30}" for i in range(30)]
    lines += [f"{i},{(i + 7) % 30}" for i in range(0, 30, 3)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_graph_writes_edges_and_json_summary(ring, tmp_path, capsys):
    out = tmp_path / "synthetic.txt"
    assert main(["graph", str(ring), "-o", str(out), "--epsilon", "1.0", "--steps", "5000",
                 "--nodes", "30", "--json", "--quiet", "--seed", "3"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["nodes"] == 30 and summary["mcmc_steps"] == 5000
    assert summary["privacy"]["epsilon"] == 1.0
    assert summary["privacy"]["epsilon_dendrogram"] + summary["privacy"]["epsilon_counts"] == 1.0
    edges = np.loadtxt(out, dtype=int).reshape(-1, 2)
    assert edges.shape[0] == summary["synthetic_edges"]
    assert (edges[:, 0] < edges[:, 1]).all() and edges.max() < 30
    assert "seed" in captured.err and "progress" not in captured.err


def test_graph_to_stdout_keeps_the_json_apart(ring, capsys):
    """-o - --json: the edge list alone on stdout, the JSON summary alone on stderr (no
    progress line mixed into it)."""
    assert main(["graph", str(ring), "-o", "-", "--epsilon", "1.0", "--steps", "3000",
                 "--nodes", "30", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.err)
    edges = np.loadtxt(captured.out.splitlines(), dtype=int).reshape(-1, 2)
    assert edges.shape[0] == summary["synthetic_edges"]


def test_graph_text_summary_progress_and_labels(tmp_path, capsys):
    path = tmp_path / "names.txt"
    path.write_text("alice bob\nbob carol\ncarol alice\ncarol dave\n")
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("alice\nbob\ncarol\ndave\nerin\n")  # public, including an isolated vertex
    out = tmp_path / "o.txt"
    assert main(["graph", str(path), "-o", str(out), "--epsilon", "2", "--steps", "100",
                 "--node-list", str(nodes)]) == 0
    captured = capsys.readouterr()
    assert "privacy spent: epsilon = 2" in captured.out
    assert "guarantee: edge-DP" in captured.out and "stationary law" in captured.out
    assert "release_hrg steps: 100/100 (100%)" in captured.err
    assert "likelihood" not in captured.err + captured.out  # never the private likelihood
    for line in out.read_text().splitlines():
        a, b = line.split()
        assert {a, b} <= {"alice", "bob", "carol", "dave", "erin"}


def test_graph_requires_a_public_vertex_set(ring, capsys):
    """Without --nodes the vertex set would come from the edges (edge-DP broken by an edge to a
    new vertex): refused (issue 14)."""
    with pytest.raises(SystemExit) as info:
        main(["graph", str(ring), "-o", "-", "--epsilon", "1"])
    assert info.value.code == 2
    assert "--nodes" in capsys.readouterr().err


def test_graph_huge_vertex_count_is_refused_before_reading(ring, capsys):
    with pytest.raises(SystemExit, match="--nodes must be at most MAX_NODES") as info:
        main(["graph", str(ring), "-o", "-", "--epsilon", "1", "--nodes", "3000000000"])
    assert info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_graph_vertex_count_beyond_memory_is_refused(ring, monkeypatch, capsys):
    """--nodes is checked against physical memory (BYTES_PER_NODE per vertex) before anything is
    read or allocated: --nodes 3000000000 once grew to 24 GB before it was killed."""
    import dpcore.graph

    monkeypatch.setattr(dpcore.graph, "_physical_memory", lambda: 20 * dpcore.graph.BYTES_PER_NODE)
    with pytest.raises(SystemExit, match="--nodes = 30 needs about .* physical memory") as info:
        main(["graph", str(ring), "-o", "-", "--epsilon", "1", "--nodes", "30", "--quiet"])
    assert info.value.code == 2


@pytest.mark.parametrize("option, value", [("--epsilon", "1e308"), ("--epsilon", "0"),
                                           ("--epsilon-split", "1e308"), ("--steps", "-1")])
def test_graph_bad_public_options_name_the_option(ring, capsys, option, value):
    argv = ["graph", str(ring), "-o", "-", "--epsilon", "1", "--nodes", "30", "--quiet"]
    argv += [option, value]
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"dpcore graph: {option} ")


def test_graph_errors_do_not_quote_the_private_file(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n12345\n")
    with pytest.raises(SystemExit) as info:
        main(["graph", str(bad), "-o", "-", "--epsilon", "1", "--nodes", "5"])
    assert "12345" not in str(info.value)
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("alice zoe\n")
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("alice\nbob\ncarol\n")
    with pytest.raises(SystemExit) as info:
        main(["graph", str(unknown), "-o", "-", "--epsilon", "1", "--node-list", str(nodes)])
    assert "zoe" not in str(info.value) and "not in --node-list" in str(info.value)


def test_graph_stdout_output_puts_summary_on_stderr(ring, capsys):
    assert main(["graph", str(ring), "-o", "-", "--epsilon", "1", "--steps", "10", "--nodes",
                 "30", "--quiet", "--seed", "1"]) == 0
    captured = capsys.readouterr()
    assert all(len(line.split()) == 2 for line in captured.out.splitlines())
    assert "synthetic edges" in captured.err


def test_graph_errors(tmp_path, ring):
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n2\n")
    with pytest.raises(SystemExit, match="without two vertex labels"):
        main(["graph", str(bad), "-o", "-", "--epsilon", "1", "--nodes", "5"])
    loops = tmp_path / "loops.txt"
    loops.write_text("0 1\n1 1\n1 2\n")
    with pytest.raises(SystemExit, match="self-loop"):
        main(["graph", str(loops), "-o", "-", "--epsilon", "1", "--quiet", "--nodes", "3"])
    assert main(["graph", str(loops), "-o", str(tmp_path / "x"), "--epsilon", "1", "--quiet",
                 "--simplify", "--steps", "10", "--nodes", "3"]) == 0
    for eps in ("-1", "1e308"):
        with pytest.raises(SystemExit, match="epsilon"):
            main(["graph", str(ring), "-o", "-", "--epsilon", eps, "--quiet", "--nodes", "30"])
    with pytest.raises(SystemExit, match="outside"):
        main(["graph", str(ring), "-o", "-", "--epsilon", "1", "--nodes", "10", "--quiet"])
    with pytest.raises(SystemExit):
        main(["graph", str(ring), "--epsilon", "1", "--nodes", "30"])  # -o is required


def test_read_edge_list_public_vertex_sets(tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("10 2\n2 7\n")
    assert _read_edge_list(str(path), 11).tolist() == [[10, 2], [2, 7]]
    assert _read_edge_list(str(path), None, ["7", "2", "10"]).tolist() == [[2, 1], [1, 0]]
