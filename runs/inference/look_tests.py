"""A look's tests for rows of compared points at once, on the log scale: Welch's
difference of log means, Student's t on paired rounds' log ratios, and the signed-rank
answer of one paired point, at a look's levels (runs/inference/spending.py). Each gives
the estimate, its p, its interval at the look's `alpha` and its equivalence interval
(TOST at `alpha_same`); runs/analysis/sequential.py decides with them."""

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from runs.inference import ranks
from runs.inference.spending import LookLevel


@dataclass(frozen=True)
class Looked:
    """A look's numbers for rows of points at once (log scale): the estimate, its p, its
    interval at the look's level and its equivalence interval (TOST at alpha_same)."""

    estimate: np.ndarray
    p: np.ndarray
    low: np.ndarray
    high: np.ndarray
    same_low: np.ndarray
    same_high: np.ndarray


def moments(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, variance, count) of each row's values; NaN pads a row with fewer rounds."""
    n = np.sum(~np.isnan(rows), axis=1)
    mean = np.nansum(rows, axis=1) / n
    return mean, np.nansum((rows - mean[:, None]) ** 2, axis=1) / (n - 1), n


def welch_look(logs: np.ndarray, base_logs: np.ndarray, level: LookLevel) -> Looked:
    """Welch on log values of each row: `logs` and `base_logs` are (points, rounds)."""
    mean, var, n = moments(logs)
    base_mean, base_var, base_n = moments(base_logs)
    part, base_part = var / n, base_var / base_n
    se = np.sqrt(part + base_part)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (part + base_part) ** 2 / (part**2 / (n - 1) + base_part**2 / (base_n - 1))
        df = np.where(np.isfinite(df), df, n + base_n - 2)
        estimate = mean - base_mean
        t = np.where(se > 0, np.abs(estimate) / se, np.where(estimate == 0, 0.0, np.inf))
    half = scipy_stats.t.ppf(1 - level.alpha / 2, df) * se
    same_half = scipy_stats.t.ppf(1 - level.alpha_same, df) * se
    return Looked(
        estimate,
        2 * scipy_stats.t.sf(t, df),
        estimate - half,
        estimate + half,
        estimate - same_half,
        estimate + same_half,
    )


def paired_look(ratios: np.ndarray, level: LookLevel) -> Looked:
    """Student's t on each row's log ratios of paired rounds: `ratios` is (points, rounds),
    NaN-padded."""
    mean, var, n = moments(ratios)
    se = np.sqrt(var / n)
    df = (n - 1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, np.abs(mean) / se, np.where(mean == 0, 0.0, np.inf))
    half = scipy_stats.t.ppf(1 - level.alpha / 2, df) * se
    same_half = scipy_stats.t.ppf(1 - level.alpha_same, df) * se
    return Looked(
        mean,
        2 * scipy_stats.t.sf(t, df),
        mean - half,
        mean + half,
        mean - same_half,
        mean + same_half,
    )


def signed_rank_row(log_ratios: np.ndarray, level: LookLevel) -> tuple[float, ...]:
    """(estimate, p, low, high, same_low, same_high) of one paired point from signed ranks
    at the look's levels; an interval too wide for its rounds is unbounded."""
    shift = ranks.signed_rank_shift(log_ratios, level.alpha)
    same = ranks.signed_rank_shift(log_ratios, level.alpha_same)
    low, high = shift.interval or (-math.inf, math.inf)
    same_low, same_high = same.equivalence_interval or (-math.inf, math.inf)
    return shift.log_shift, shift.p, low, high, same_low, same_high


def with_rows(looked: Looked, rows: dict[int, tuple[float, ...]]) -> Looked:
    """`looked` with the rows in `rows` (row -> its six numbers) replaced."""
    columns = [np.array(column, dtype=float) for column in (
        looked.estimate, looked.p, looked.low, looked.high, looked.same_low, looked.same_high
    )]  # fmt: skip
    for row, numbers in rows.items():
        for column, value in zip(columns, numbers, strict=True):
            column[row] = value
    return Looked(*columns)


def row_of(looked: Looked, row: int) -> tuple[float, ...]:
    fields = (looked.estimate, looked.p, looked.low, looked.high, looked.same_low, looked.same_high)
    return tuple(float(column[row]) for column in fields)
