"""A minimal progress bar for long runs (MCMC chains, Gibbs sweeps, grid searches).

It shows public counters only (steps done out of the public total, elapsed time and an estimate
of the time left), never a value computed from the data. On a terminal the line is redrawn in
place; elsewhere (logs, CI) a line is written at most every tenth of the run. Library calls
leave it off unless ``progress=True``; the CLI turns it on.

Privacy
-------
Prints public counters and wall-clock times only. Run time is public in dpcore's threat model
(see the kernels' notes on timing).
"""
from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Progress"]


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60:d}:{seconds % 60:02d}"


class Progress:
    """Context manager: ``with Progress("label", total, enabled=...) as bar: bar.update(done)``.

    Parameters
    ----------
    label : str
        What runs (public).
    total : int
        The public number of units (steps, sweeps, candidates).
    enabled : bool
        False: every method does nothing.
    stream : file, optional
        Default ``sys.stderr``.
    width : int, default=30
        Characters of the bar on a terminal.
    """

    def __init__(self, label: str, total: int, *, enabled: bool, stream: TextIO | None = None,
                 width: int = 30):
        self.label, self.total, self.enabled = label, max(int(total), 0), bool(enabled)
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.done = 0
        self._start = time.monotonic()
        self._last_draw = -1.0
        self._last_tenth = -1
        isatty = getattr(self.stream, "isatty", None)
        self._terminal = bool(isatty and isatty())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(finished=exc_type is None)

    def line(self) -> str:
        """The text shown for the current count."""
        fraction = self.done / self.total if self.total else 1.0
        elapsed = time.monotonic() - self._start
        text = f"{self.label}: {self.done}/{self.total} ({100.0 * fraction:.0f}%) {_clock(elapsed)}"
        if 0.0 < fraction < 1.0:
            text += f" elapsed, ~{_clock(elapsed * (1.0 - fraction) / fraction)} left"
        if self._terminal:
            filled = int(round(self.width * fraction))
            text = f"[{'#' * filled}{'.' * (self.width - filled)}] " + text
        return text

    def update(self, done: int) -> None:
        """Set the count to ``done`` (public) and redraw when due."""
        if not self.enabled:
            return
        self.done = min(int(done), self.total)
        now = time.monotonic()
        if self._terminal:
            if now - self._last_draw >= 0.1 or self.done == self.total:
                self.stream.write("\r" + self.line())
                self.stream.flush()
                self._last_draw = now
            return
        tenth = (10 * self.done) // self.total if self.total else 10
        if tenth > self._last_tenth:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last_tenth = tenth

    def close(self, finished: bool = True) -> None:
        """End the line (on a terminal) after the last update."""
        if self.enabled and self._terminal:
            if finished:
                self.update(self.total)
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False
