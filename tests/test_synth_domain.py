"""dpcore.synth.Domain: a public domain, public rules for values outside it, encode / decode."""
import json
import math

import numpy as np
import pytest
from scipy import stats

from _gof import ALPHA, chisquare_pvalue

from dpcore.synth import Categorical, Domain, Numeric


def adult_like_domain():
    return Domain({
        "age": Numeric(17, 90, bins=8, integer=True),
        "workclass": Categorical(["private", "public", "self"], other="private"),
        "sex": Categorical(["F", "M"]),
        "hours": Numeric(0.0, 100.0, bins=5),
    })


# -- categorical ----------------------------------------------------------------------------

def test_categorical_codes_and_missing_code():
    col = Categorical(["a", "b", "c"])
    assert col.size == 4 and col.outside_code == 3
    codes = col.encode(["a", "c", "zzz", None, math.nan, "b", 7])
    assert codes.tolist() == [0, 2, 3, 3, 3, 1, 3]


def test_categorical_other_is_a_declared_category():
    col = Categorical(["x", "y", "other"], other="other")
    assert col.size == 3 and col.outside_code == 2
    assert col.encode(["x", "unknown", None, "y"]).tolist() == [0, 2, 2, 1]


def test_categorical_matches_by_text():
    col = Categorical([1, 2, "3"])
    assert col.encode(["1", 2.0, 3, "2", 1.5, "01"]).tolist() == [0, 1, 2, 1, 3, 3]


@pytest.mark.parametrize("bad, error", [
    ("abc", TypeError), ([], ValueError), (["a", "a"], ValueError), ([1, "1"], ValueError),
    (5, TypeError)])
def test_categorical_rejects_bad_categories(bad, error):
    with pytest.raises(error, match="categor"):
        Categorical(bad)


def test_categorical_other_must_be_a_category():
    with pytest.raises(ValueError, match="other"):
        Categorical(["a", "b"], other="c")


# -- numeric ----------------------------------------------------------------------------------

def test_numeric_bins_clipping_and_missing():
    col = Numeric(0.0, 10.0, bins=5)
    assert col.size == 6
    values = [0.0, 1.99, 2.0, 9.99, 10.0, -5.0, 1e300, math.inf, -math.inf, math.nan, None,
              "3.5", "not a number", "1" * 100]
    assert col.encode(np.array(values, dtype=object)).tolist() == [
        0, 0, 1, 4, 4, 0, 4, 4, 0, 5, 5, 1, 5, 5]


def test_numeric_fill_sends_non_numbers_to_a_value():
    col = Numeric(0.0, 10.0, bins=5, fill=5.0)
    assert col.size == 5
    assert col.encode(np.array([math.nan, "x", None, 1.0], dtype=object)).tolist() == [2, 2, 2, 0]


@pytest.mark.parametrize("kwargs, error", [
    (dict(lower=1.0, upper=0.0), ValueError), (dict(lower=0.0, upper=math.inf), ValueError),
    (dict(lower=0, upper=1, bins=0), ValueError), (dict(lower=0, upper=1, bins=2.0), TypeError),
    (dict(lower=0, upper=1, integer="yes"), TypeError),
    (dict(lower=0, upper=1, fill=math.nan), ValueError)])
def test_numeric_rejects_bad_parameters(kwargs, error):
    with pytest.raises(error):
        Numeric(**kwargs)


def test_integer_decode_is_uniform_over_the_integers_of_each_bin():
    """Bins of [0, 10] in 3: [0, 3.33) -> 0..3, [3.33, 6.67) -> 4..6, [6.67, 10] -> 7..10; each
    decoded integer must encode back to its bin, uniformly among them (chi-square, alpha 1e-4)."""
    col = Numeric(0, 10, bins=3, integer=True)
    rng = np.random.default_rng(1)
    for code, members in [(0, [0, 1, 2, 3]), (1, [4, 5, 6]), (2, [7, 8, 9, 10])]:
        values = col.decode(np.full(4000, code), rng)
        assert set(values.tolist()) == set(members)
        assert np.all(col.encode(values) == code)
        observed = [np.sum(values == m) for m in members]
        assert chisquare_pvalue(observed, np.full(len(members), 1 / len(members))) > ALPHA


def test_integer_decode_law_can_fail():
    """Power: the same check rejects integers drawn with the end of the bin twice as likely."""
    p = np.array([1, 1, 1, 2]) / 5
    observed = np.random.default_rng(2).multinomial(4000, p)
    assert chisquare_pvalue(observed, np.full(4, 0.25)) < ALPHA


def test_real_decode_is_uniform_within_the_bin():
    col = Numeric(-1.0, 3.0, bins=4)
    rng = np.random.default_rng(3)
    values = col.decode(np.full(5000, 2), rng)
    assert np.all(col.encode(values) == 2)
    assert stats.kstest(values, stats.uniform(1.0, 1.0).cdf).pvalue > ALPHA
    assert stats.kstest(values ** 2, stats.uniform(1.0, 1.0).cdf).pvalue < ALPHA  # power
    assert np.all(np.isnan(col.decode(np.full(3, 4), rng)))


def test_bin_without_integer_decodes_to_its_rounded_middle():
    col = Numeric(0, 1, bins=4, integer=True)  # [0, .25) holds 0; [.75, 1] holds 1
    rng = np.random.default_rng(0)
    assert set(col.decode(np.array([0, 3]), rng).tolist()) == {0.0, 1.0}
    assert col.decode(np.array([1]), rng).tolist() == [0.0]  # [.25, .5): middle .375 -> 0


# -- domain -----------------------------------------------------------------------------------

def test_domain_shape_and_dict_encode():
    dom = adult_like_domain()
    assert dom.shape == (9, 3, 3, 6) and dom.names == ("age", "workclass", "sex", "hours")
    codes = dom.encode({"age": [17, 90, None, 200], "workclass": ["public", "??", None, "self"],
                        "sex": ["F", "M", "X", None], "hours": [0, 100, "n/a", 55.0],
                        "ignored": [1, 2, 3, 4]})
    assert codes.dtype == np.int64
    assert codes.tolist() == [[0, 1, 0, 0], [7, 0, 1, 4], [8, 0, 2, 5], [7, 2, 2, 2]]


def test_domain_never_takes_codes_from_the_data():
    """Whatever the values, codes stay within the declared sizes (a value never adds a code)."""
    dom = adult_like_domain()
    rng = np.random.default_rng(4)
    junk = np.array(["zz", None, math.nan, -1e308, 1e308, "9" * 80, b"bytes", (1, 2), 3.5],
                    dtype=object)
    table = {n: rng.choice(junk, 500) for n in dom.names}
    codes = dom.encode(table)
    assert codes.shape == (500, 4)
    assert np.all(codes >= 0) and np.all(codes < np.array(dom.shape))


def test_encode_dataframe_array_and_csv_agree(tmp_path):
    pd = pytest.importorskip("pandas")
    dom = adult_like_domain()
    frame = pd.DataFrame({"hours": [40.0, np.nan, 12.5], "sex": ["F", "M", None],
                          "age": [30, 45, 61], "workclass": ["self", "public", "nope"]})
    from_frame = dom.encode(frame)
    from_array = dom.encode(frame[list(dom.names)].to_numpy(dtype=object))
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    from_csv = dom.encode(path)
    from_csv_str = dom.encode(str(path))
    assert from_frame.tolist() == from_array.tolist() == from_csv.tolist() == from_csv_str.tolist()
    assert from_frame.tolist() == [[1, 2, 0, 2], [3, 1, 1, 5], [4, 0, 2, 0]]


def test_csv_short_rows_are_outside_the_domain(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("sex,age,workclass,hours\nF,30\nM,40,public,10,extra\n")
    dom = adult_like_domain()
    assert dom.encode(path).tolist() == [[1, 0, 0, 5], [2, 1, 1, 0]]


def test_missing_column_and_bad_shape_raise():
    dom = adult_like_domain()
    with pytest.raises(ValueError, match="workclass"):
        dom.encode({"age": [1], "sex": ["F"], "hours": [1]})
    with pytest.raises(ValueError, match="4 columns"):
        dom.encode(np.zeros((3, 2)))
    with pytest.raises(TypeError):
        Domain({"a": "not a column"})
    with pytest.raises(ValueError, match="at least one"):
        Domain({})


def test_decode_round_trip_keeps_the_codes():
    dom = adult_like_domain()
    rng = np.random.default_rng(5)
    codes = np.column_stack([rng.integers(0, s, 300) for s in dom.shape])
    out = dom.decode(codes, random_state=6, output="dict")
    again = dom.encode(out)
    # the missing codes decode to None/NaN and encode back to the missing code; workclass has
    # no missing code (other="private")
    assert np.array_equal(again, codes)


def test_decode_frame_and_errors():
    pytest.importorskip("pandas")
    dom = adult_like_domain()
    frame = dom.decode(np.zeros((2, 4), dtype=np.int64), random_state=0)
    assert list(frame.columns) == list(dom.names) and len(frame) == 2
    with pytest.raises(ValueError, match="codes"):
        dom.decode(np.full((1, 4), 99))
    with pytest.raises(ValueError, match="output"):
        dom.decode(np.zeros((1, 4), dtype=np.int64), output="list")


def test_schema_json_round_trip(tmp_path):
    dom = adult_like_domain()
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(dom.to_json()))
    assert Domain.from_json(path) == dom
    assert Domain.from_json(str(path)) == dom
    assert Domain.from_json(json.dumps(dom.to_json())) == dom
    assert Domain.from_json(dom.to_json()).shape == dom.shape


@pytest.mark.parametrize("schema", [
    {"cols": []}, {"columns": [{"name": "a"}]},
    {"columns": [{"name": "a", "type": "date"}]},
    {"columns": [{"name": "a", "type": "numeric", "lower": 0}]},
    {"columns": [{"name": "a", "type": "categorical", "categories": ["x"]},
                 {"name": "a", "type": "categorical", "categories": ["y"]}]}])
def test_bad_schema_raises_value_error(schema):
    with pytest.raises(ValueError):
        Domain.from_json(schema)
