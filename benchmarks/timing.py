"""How the benchmarks time things on a shared, noisy machine: every case several times, interleaved
with its peer (native, ours, native, ours...), so a slow minute hurts both sides alike; figures are
medians with their spread, and ratios are taken round by round within one run."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    def text(self, digits: int = 2) -> str:
        return f"{self.median:.{digits}f} ({self.low:.{digits}f}-{self.high:.{digits}f})"


def spread(values: Sequence[float]) -> Spread:
    return Spread(statistics.median(values), min(values), max(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank: with 99 batches p99 is the slowest but one."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def interleaved(cases: Sequence[tuple[str, Callable[[], float]]], runs: int,
                report: Callable[[str, int, float], None] = lambda name, run, seconds: None,
                alternate: bool = False) -> dict[str, list[float]]:
    """Run every case ``runs`` times, round by round in the given order (the peer first), or with
    ``alternate`` in that order and reversed in turn (see ``alternating``); returns each case's
    timings in round order, so ``ratios`` can pair them."""
    timings: dict[str, list[float]] = {name: [] for name, _ in cases}
    for run in range(runs):
        for name, case in (reversed(cases) if alternate and run % 2 else cases):
            seconds = case()
            timings[name].append(seconds)
            report(name, run, seconds)
    return timings


def alternating(case: Callable[[bool], float], runs: int,
                report: Callable[[bool, float], None] = lambda on, seconds: None) -> dict[bool, list[float]]:
    """A setting off against on: ``runs`` rounds of (off, on) and (on, off) in turn, since the second
    run of a pair gained up to 1.2x with both sides running the same code (measured); returns each
    side's timings in round order."""
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for round_ in range(runs):
        for on in ((False, True) if round_ % 2 == 0 else (True, False)):
            seconds[on].append(case(on))
            report(on, seconds[on][-1])
    return seconds


def ratios(ours: Sequence[float], peer: Sequence[float]) -> Spread:
    """Per round, how many times faster ours is than the peer (peer time / our time)."""
    return spread([p / o for o, p in zip(ours, peer)])
