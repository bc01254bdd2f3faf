"""The dpcore command line."""
import json
import subprocess
import sys

import pytest

import dpcore
from dpcore.cli import main, run_demo


def run(*args):
    return subprocess.run([sys.executable, "-m", "dpcore", *args], capture_output=True, text=True)


def test_demo_json_spends_within_budget():
    proc = run("demo", "--json", "--seed", "1", "--epsilon", "2.0")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    spent, budget = result["privacy"]["spent"], result["privacy"]["budget"]
    assert 0 < spent["epsilon"] <= budget["epsilon"] == 2.0
    assert spent["delta"] <= budget["delta"]
    rel = result["releases"]
    assert set(rel) == {"count", "sector_counts", "mean_age", "mean_hours_per_week", "mean_income"}
    assert "seed" in proc.stderr  # the warning about seeds


def test_demo_text_output():
    proc = run("demo")
    assert proc.returncode == 0, proc.stderr
    assert "privacy spent: epsilon" in proc.stdout
    assert "mean income" in proc.stdout


def test_demo_is_noisy_but_sensible():
    """At a large epsilon the releases are close to the truth; at seed changes they differ."""
    a = run_demo(epsilon=200.0, random_state=1)["releases"]
    b = run_demo(epsilon=200.0, random_state=2)["releases"]
    assert a["count"] != b["count"]
    assert abs(a["count"] - 2000) < 50
    assert 25 < a["mean_age"] < 60


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert dpcore.__version__ in capsys.readouterr().out
    for args in (["--help"], ["demo", "--help"]):
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 0


def test_bad_epsilon_is_a_clear_error():
    proc = run("demo", "--epsilon", "-1")
    assert proc.returncode != 0
    assert "epsilon" in proc.stderr


def test_demo_categories_are_public(tmp_path):
    """A sector that occurs in the data but not in the public list is never named in the output."""
    path = tmp_path / "data.csv"
    rows = ["age,hours_per_week,income,sector"] + ["40,40,50000,private"] * 50 + ["40,40,50000,astronaut"]
    path.write_text("\n".join(rows) + "\n")
    from dpcore.cli import DEMO_SECTORS

    result = run_demo(epsilon=1.0, data=str(path), random_state=3)
    assert tuple(result["releases"]["sector_counts"]) == DEMO_SECTORS
    assert "astronaut" not in json.dumps(result)


def test_demo_reads_parquet_or_says_what_is_missing(tmp_path):
    path = tmp_path / "data.parquet"
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        proc = run("demo", "--data", str(path))
        assert proc.returncode != 0 and "pyarrow" in proc.stderr
        return
    table = pa.table({"age": [30.0] * 20, "hours_per_week": [40.0] * 20, "income": [1e4] * 20,
                      "sector": ["public"] * 20})
    pq.write_table(table, path)
    result = run_demo(epsilon=100.0, data=str(path), random_state=4)
    assert abs(result["releases"]["count"] - 20) < 5


def test_demo_seed_gives_one_stream_for_all_releases(monkeypatch):
    """--seed must not restart the same stream at every release (identical noise)."""
    import dpcore
    from dpcore import cli

    seen = []
    for name in ("laplace", "gaussian"):
        real = getattr(dpcore, name)

        def spy(*args, _real=real, **kwargs):
            seen.append(kwargs["random_state"])
            return _real(*args, **kwargs)

        monkeypatch.setattr(cli.dpcore, name, spy)
    cli.run_demo(1.0, 1e-6, None, 7)
    assert len(seen) >= 4
    assert all(r is seen[0] for r in seen) and not isinstance(seen[0], int)


@pytest.mark.parametrize("argv, match", [
    (["demo", "--epsilon", "1e308"], "epsilon"),
    (["demo", "--data", "/nonexistent/demo.csv"], "cannot read --data"),
    (["demo", "--data", "/"], "cannot read --data"),
])
def test_demo_bad_input_is_one_line(argv, match, capsys):
    from dpcore.cli import main

    with pytest.raises(SystemExit, match=match) as info:
        main(argv)
    assert "\n" not in str(info.value) and "Traceback" not in str(info.value)
    assert info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["demo", "--data", "/nonexistent/demo.csv"],
    ["demo", "--data", "/"],
    ["demo", "--epsilon", "1e308"],
    ["demo", "--delta", "1e308"],
])
def test_demo_errors_exit_with_status_2_and_one_line(argv):
    """A subprocess: the exit status and stderr are what a shell sees."""
    proc = run(*argv)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("dpcore demo: ")
    option = argv[1]
    assert option in proc.stderr


def test_demo_errors_do_not_quote_private_cells(tmp_path):
    from dpcore.cli import main

    data = tmp_path / "d.csv"
    data.write_text("age,hours_per_week,income,sector\n41,40,secret-value,private\n")
    with pytest.raises(SystemExit) as info:
        main(["demo", "--data", str(data)])
    assert "secret-value" not in str(info.value) and "income" in str(info.value)


def test_demo_nan_cell_is_refused_before_any_release(tmp_path, monkeypatch):
    """A NaN cell used to stop the demo midway, after the count and the sector counts had been
    charged; it is refused while loading, naming the column, before anything is released."""
    from dpcore import cli

    calls = []
    monkeypatch.setattr(cli.dpcore, "laplace", lambda *a, **k: calls.append(a))
    data = tmp_path / "d.csv"
    data.write_text("age,hours_per_week,income,sector\nnan,40,5000,private\n41,40,6000,public\n")
    with pytest.raises(ValueError, match="'age'.*NaN"):
        cli.run_demo(1.0, 1e-6, str(data), 0)
    assert calls == []


# ------------------------------------------------------------------------------------------------
# dpcore publish

def _column_csv(tmp_path, values, name="age"):
    path = tmp_path / "data.csv"
    path.write_text(name + "\n" + "\n".join(str(v) for v in values) + "\n")
    return path


def test_publish_json_is_consistent_and_charged_once(tmp_path, capsys):
    ages = [20.5, 33.0, 47.2, 51.0, 64.9] * 200
    path = _column_csv(tmp_path, ages)
    main(["publish", str(path), "--column", "age", "--range", "0", "100", "--bins", "20",
          "--epsilon", "2.0", "--ranges", "0:10,10:20,4:13", "--json", "--seed", "3"])
    result = json.loads(capsys.readouterr().out)
    counts = result["counts"]
    assert len(counts) == 20 and len(result["edges"]) == 21
    for q in result["ranges"]:   # range counts are sums of the consistent bin counts
        lo, hi = q["bins"]
        assert q["count"] == pytest.approx(sum(counts[lo:hi]), abs=1e-6)
        assert q["standard_error"] > 0
    assert sum(counts) == pytest.approx(1000, abs=60)
    assert result["privacy"]["epsilon"] == 2.0


def test_publish_nonnegative_keeps_the_total(tmp_path, capsys):
    path = _column_csv(tmp_path, [5.0] * 30)
    argv = ["publish", str(path), "--column", "age", "--range", "0", "100", "--bins", "50",
            "--epsilon", "0.5", "--json", "--seed", "4"]
    main(argv)
    raw = json.loads(capsys.readouterr().out)["counts"]
    main(argv + ["--nonnegative"])
    nonneg = json.loads(capsys.readouterr().out)["counts"]
    assert min(nonneg) >= 0 and min(raw) < 0
    assert sum(nonneg) == pytest.approx(max(sum(raw), 0), abs=1e-6)


@pytest.mark.parametrize("extra, match", [
    (["--column", "nope"], "no column 'nope'"),
    (["--column", "age", "--ranges", "0:11"], "--ranges: 0:11"),
    (["--column", "age", "--ranges", "a-b"], "--ranges must be"),
    (["--column", "age", "--bins", "0"], "--bins must be >= 1"),
])
def test_publish_errors_are_one_line(tmp_path, capsys, extra, match):
    path = _column_csv(tmp_path, [1.0, 2.0])
    argv = ["publish", str(path), "--range", "0", "10", "--bins", "10", "--epsilon", "1"] + extra
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


def _publish_counts(path, capsys, seed=6):
    main(["publish", str(path), "--column", "age", "--range", "0", "10", "--bins", "5",
          "--epsilon", "1", "--json", "--seed", str(seed)])
    captured = capsys.readouterr()
    return json.loads(captured.out)["counts"], captured


def test_publish_counts_a_bad_cell_as_outside_the_range(tmp_path, capsys):
    """One public rule for every cell (issue 25): blank, unparsable, NaN, infinite, over-long or
    huge cells are not counted, exactly as a number outside the range; the release happens and
    quotes no cell."""
    bad = ["", "secret-value-17", "nan", "inf", "-inf", "1e300", "9" * 80]
    mixed, captured = _publish_counts(_column_csv(tmp_path, [1.0, *bad, 3.0]), capsys)
    assert "secret" not in captured.out + captured.err
    outside, _ = _publish_counts(_column_csv(tmp_path, [1.0, *([50.0] * len(bad)), 3.0]), capsys)
    assert mixed == outside  # the same seed: the same release


def test_publish_unknown_column_is_refused_before_reading_rows(tmp_path, capsys, monkeypatch):
    from dpcore import cli

    monkeypatch.setattr(cli, "_read_rows", lambda path: pytest.fail("rows read"))
    path = _column_csv(tmp_path, [1.0, 2.0])
    with pytest.raises(SystemExit):
        main(["publish", str(path), "--column", "nope", "--range", "0", "10", "--bins", "5",
              "--epsilon", "1"])
    assert "no column 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["", "age\n"])
def test_publish_releases_an_empty_file_like_any_other(tmp_path, capsys, text):
    path = tmp_path / "empty.csv"
    path.write_text(text)
    counts, _ = _publish_counts(path, capsys)
    assert len(counts) == 5 and any(c != 0 for c in counts)  # noise on the zero counts


def test_interrupt_is_one_line_not_a_traceback(monkeypatch, capsys):
    from dpcore import cli

    def interrupted(*args, **kwargs):
        """Stand-in for the demo, interrupted by Ctrl-C."""
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_demo", interrupted)
    assert main(["demo"]) == 130
    assert capsys.readouterr().err.strip() == "dpcore demo: interrupted"
