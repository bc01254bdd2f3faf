"""`dpcore synth`: synthetic records of a CSV table over a public JSON schema."""
import csv
import json

import numpy as np
import pytest

from dpcore.cli import main

SCHEMA = {"columns": [
    {"name": "age", "type": "numeric", "lower": 18, "upper": 90, "bins": 8, "integer": True},
    {"name": "sex", "type": "categorical", "categories": ["F", "M"]},
    {"name": "sector", "type": "categorical", "categories": ["a", "b", "c", "other"],
     "other": "other"},
]}


def write_inputs(tmp_path, n=400):
    rng = np.random.default_rng(0)
    data = tmp_path / "data.csv"
    with open(data, "w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["sex", "age", "sector", "ignored"])
        for _ in range(n):
            sex = rng.choice(["F", "M"])
            w.writerow([sex, int(rng.integers(18, 90)), "a" if sex == "F" else rng.choice(
                ["b", "c", "zzz"]), "x"])
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    return data, schema


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_synth_writes_records_in_the_schema(tmp_path, capsys):
    data, schema = write_inputs(tmp_path)
    out = tmp_path / "synth.csv"
    assert main(["synth", str(data), "--schema", str(schema), "-o", str(out), "--rho", "2",
                 "-n", "300", "--json", "--seed", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = read_csv(out)
    assert len(rows) == 300 == summary["synthetic_records"]
    assert list(rows[0]) == ["age", "sex", "sector"]
    assert {r["sex"] for r in rows} <= {"F", "M", ""}
    assert {r["sector"] for r in rows} <= {"a", "b", "c", "other"}
    ages = [int(r["age"]) for r in rows if r["age"]]
    assert min(ages) >= 18 and max(ages) <= 90
    assert summary["privacy"]["rho"] == 2.0 and "zCDP" in summary["privacy"]["guarantee"]
    # the planted dependence (F -> sector a) survives
    female = [r["sector"] for r in rows if r["sex"] == "F"]
    assert np.mean([s == "a" for s in female]) > 0.7


def test_synth_text_summary_and_epsilon(tmp_path, capsys):
    data, schema = write_inputs(tmp_path)
    out = tmp_path / "synth.csv"
    main(["synth", str(data), "--schema", str(schema), "-o", str(out), "--epsilon", "3",
          "--seed", "2"])
    text = capsys.readouterr().out
    assert "synthetic records written" in text and "epsilon-DP, epsilon = 3" in text
    assert len(read_csv(out)) > 300  # default: the noisy record count


def test_synth_with_aim(tmp_path, capsys):
    data, schema = write_inputs(tmp_path)
    out = tmp_path / "synth.csv"
    assert main(["synth", str(data), "--schema", str(schema), "-o", str(out), "--rho", "2",
                 "--method", "aim", "--max-time", "30", "-n", "300", "--json",
                 "--seed", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = read_csv(out)
    assert len(rows) == 300 and summary["method"] == "aim"
    assert "AIM" in summary["privacy"]["guarantee"] and summary["selected_marginals"]
    female = [r["sector"] for r in rows if r["sex"] == "F"]
    assert np.mean([s == "a" for s in female]) > 0.7


@pytest.mark.parametrize("extra, match", [
    ([], "exactly one of --rho"), (["--rho", "1", "--epsilon", "1"], "exactly one"),
    (["--rho", "-1"], "--rho must be > 0"), (["--epsilon", "1", "--delta", "2"], "delta"),
    (["--rho", "1", "-n", "-3"], "-n must be >= 0"),
    (["--rho", "1", "--max-time", "5"], "--method aim only"),
    (["--rho", "1", "--method", "aim", "--max-time", "0"], "--max-time must be > 0")])
def test_synth_errors_are_one_line(tmp_path, capsys, extra, match):
    data, schema = write_inputs(tmp_path, 20)
    with pytest.raises(SystemExit) as exc:
        main(["synth", str(data), "--schema", str(schema), "-o", str(tmp_path / "o.csv"),
              *extra])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dpcore synth:") and match in err and "\n" not in err
    assert not (tmp_path / "o.csv").exists()


def test_synth_refuses_a_schema_column_missing_from_the_input(tmp_path, capsys):
    data, schema = write_inputs(tmp_path, 20)
    bad = dict(SCHEMA)
    bad["columns"] = SCHEMA["columns"] + [{"name": "zip", "type": "categorical",
                                           "categories": ["1"]}]
    schema.write_text(json.dumps(bad))
    with pytest.raises(SystemExit):
        main(["synth", str(data), "--schema", str(schema), "-o", "-", "--rho", "1"])
    assert "zip" in capsys.readouterr().err


def test_synth_missing_file_is_one_line(tmp_path, capsys):
    _, schema = write_inputs(tmp_path, 5)
    with pytest.raises(SystemExit):
        main(["synth", str(tmp_path / "nope.csv"), "--schema", str(schema), "-o", "-",
              "--rho", "1"])
    err = capsys.readouterr().err
    assert "cannot open" in err and "nope.csv" in err


def test_synth_to_stdout_puts_the_summary_on_stderr(tmp_path, capsys):
    data, schema = write_inputs(tmp_path, 50)
    main(["synth", str(data), "--schema", str(schema), "-o", "-", "--rho", "1", "-n", "5",
          "--seed", "3"])
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == "age,sex,sector" and len(captured.out.splitlines()) == 6
    assert "privacy spent" in captured.err
