"""The progress bar of long runs: public counters and times only, off unless asked for."""
import io
import re

import numpy as np

from dpcore import graph
from dpcore.bingham import bingham
from dpcore._progress import Progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_log_stream_gets_a_line_per_tenth_and_nothing_when_disabled():
    out = io.StringIO()
    with Progress("chain steps", 1000, enabled=True, stream=out) as bar:
        for done in range(0, 1001, 50):
            bar.update(done)
    lines = out.getvalue().splitlines()
    assert len(lines) == 11   # 0%, 10%, ..., 100%
    assert lines[-1].startswith("chain steps: 1000/1000 (100%)")
    assert all(re.fullmatch(r"chain steps: \d+/1000 \(\d+%\) \d+:\d\d( elapsed, ~\d+:\d\d left)?", ln)
               for ln in lines)
    quiet = io.StringIO()
    with Progress("x", 10, enabled=False, stream=quiet) as bar:
        bar.update(5)
    assert quiet.getvalue() == ""


def test_terminal_redraws_in_place_and_ends_the_line():
    out = _Terminal()
    with Progress("sweeps", 4, enabled=True, stream=out, width=8) as bar:
        bar.update(4)
    text = out.getvalue()
    assert text.startswith("\r[########] sweeps: 4/4 (100%)") and text.endswith("\n")


def test_long_runs_print_counters_only(capsys):
    """PrivHRG and the Gibbs sampler report steps/sweeps, never a likelihood or utility."""
    ring = np.array([[i, (i + 1) % 30] for i in range(30)])
    graph.release_hrg(ring, n_nodes=30, epsilon=1.0, n_steps=3000, random_state=0, progress=True)
    bingham(np.diag([5.0, 1.0, 0.0]), 2, n_sweeps=40, random_state=0, progress=True)
    err = capsys.readouterr().err
    assert "release_hrg steps: 3000/3000 (100%)" in err
    assert "bingham sweeps: 40/40 (100%)" in err
    assert "likelihood" not in err and "trace" not in err
