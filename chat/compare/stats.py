"""Statistics of comparisons: percentiles of repeated runs and Bradley–Terry ratings of votes.

Pure Python (no numpy): inputs are small (≤ 20 runs per lane, a user's votes).

May import: the standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) with linear interpolation between closest ranks (the
    default of numpy.percentile); None for no values."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def spread(values: Iterable[float | None]) -> dict[str, float | None]:
    """``{"n", "median", "p90", "min", "max"}`` of the measured values (None skipped)."""
    xs = [float(v) for v in values if v is not None]
    return {
        "n": len(xs), "median": percentile(xs, 50), "p90": percentile(xs, 90),
        "min": min(xs) if xs else None, "max": max(xs) if xs else None,
    }


@dataclass(frozen=True)
class Rating:
    """A model's Bradley–Terry rating: ``score`` on the Elo-like scale (400·log10 strength,
    centred so the geometric mean strength is 1000), its 95 % interval ``low``–``high``
    (± 1.96 standard errors from the observed information; the prior keeps it finite, also for
    a model that never lost), and ``wins``, ``losses``, ``ties``, ``games``."""

    key: str
    score: float
    low: float | None
    high: float | None
    wins: int
    losses: int
    ties: int

    @property
    def games(self) -> int:
        return self.wins + self.losses + self.ties

    @property
    def win_rate(self) -> float | None:
        """Wins (a tie counts half) per game."""
        return (self.wins + 0.5 * self.ties) / self.games if self.games else None


SCALE = 400.0 / math.log(10.0)
PRIOR = 0.5  # pseudo-games against a virtual average player: keeps never-lost models finite


def bradley_terry(games: Sequence[tuple[str, str, float]], *, iterations: int = 500, tol: float = 1e-10) -> list[Rating]:
    """Ratings from pairwise results ``(a, b, score_of_a)`` with score 1 (a won), 0 (b won) or
    0.5 (a tie, counted as half a win each).

    The fit is the minorize–maximize iteration of Hunter (2004) for strengths ``p``:
    ``p_i ← W_i / Σ_j n_ij / (p_i + p_j)``, with a prior of :data:`PRIOR` win and loss against
    a virtual player of strength 1 for every model (so a model that never lost gets a large but
    finite rating). Scores are ``1000 + 400·log10(p_i / geometric mean)``. The interval comes
    from the observed information of log-strength, with the virtual games included:
    ``I_i = Σ_j n_ij p_i p_j / (p_i + p_j)²``; ``± 1.96 / √I_i``.

    Returns one :class:`Rating` per model, best first.
    """
    names = sorted({a for a, _, _ in games} | {b for _, b, _ in games})
    if not names:
        return []
    idx = {n: i for i, n in enumerate(names)}
    k = len(names)
    wins = [PRIOR] * k  # prior: half a win against the virtual player…
    n = [[0.0] * k for _ in range(k)]
    tally = {name: [0, 0, 0] for name in names}
    for a, b, s in games:
        i, j = idx[a], idx[b]
        if i == j:
            continue
        n[i][j] += 1
        n[j][i] += 1
        wins[i] += s
        wins[j] += 1 - s
        if s == 1:
            tally[a][0] += 1
            tally[b][1] += 1
        elif s == 0:
            tally[a][1] += 1
            tally[b][0] += 1
        else:
            tally[a][2] += 1
            tally[b][2] += 1
    p = [1.0] * k
    for _ in range(iterations):
        new = []
        for i in range(k):
            denom = 2 * PRIOR / (p[i] + 1.0)  # …and half a loss: one virtual game
            denom += sum(n[i][j] / (p[i] + p[j]) for j in range(k) if n[i][j])
            new.append(wins[i] / denom)
        change = max(abs(math.log(a / b)) for a, b in zip(new, p, strict=True))
        p = new
        if change < tol:
            break
    g = math.exp(sum(math.log(x) for x in p) / k)
    out = []
    for name in names:
        i = idx[name]
        info = 2 * PRIOR * p[i] / (p[i] + 1.0) ** 2
        info += sum(n[i][j] * p[i] * p[j] / (p[i] + p[j]) ** 2 for j in range(k) if n[i][j])
        score = 1000.0 + SCALE * math.log(p[i] / g)
        half = 1.96 * SCALE / math.sqrt(info) if info > 0 else None
        w, loss, t = tally[name]
        out.append(Rating(name, round(score, 1), round(score - half, 1) if half else None,
                          round(score + half, 1) if half else None, w, loss, t))
    out.sort(key=lambda r: -r.score)
    return out
