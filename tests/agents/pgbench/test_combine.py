"""Summing several pgbench processes into one point (pure arithmetic, no pgbench)."""

import math

from agents.pgbench.combine import combine_processes, sum_progress
from agents.pgbench.group import LiveSum


def process(tps, transactions, latency, stddev, progress=()):
    return {
        "tps": tps,
        "transactions": transactions,
        "latency_avg_ms": latency,
        "latency_stddev_ms": stddev,
        "failed": 0,
        "retried": None,
        "aborted_clients": 0,
        "progress": list(progress),
    }


def line(t, tps, latency, stddev=0.0):
    return {"t": t, "tps": tps, "latency_ms": latency, "stddev_ms": stddev}


def test_tps_and_transactions_are_sums_and_latency_is_transaction_weighted():
    combined = combine_processes([process(100.0, 300, 2.0, 1.0), process(50.0, 100, 6.0, 1.0)])

    assert combined["tps"] == 150.0
    assert combined["transactions"] == 400
    assert combined["latency_avg_ms"] == (300 * 2.0 + 100 * 6.0) / 400
    pooled = math.sqrt((300 * (1 + 1.0**2) + 100 * (1 + 3.0**2)) / 400)
    assert combined["latency_stddev_ms"] == round(pooled, 3)
    assert combined["retried"] is None, "unknown in one process: unknown for the point"


def test_a_process_without_a_summary_leaves_the_point_without_one():
    assert (
        combine_processes([process(100.0, 300, 2.0, 1.0), process(None, None, None, None)])["tps"]
        is None
    )


def test_timeline_sums_only_the_seconds_every_process_reported():
    summed = sum_progress([[line(1.0, 10, 1.0), line(2.0, 20, 1.0)], [line(1.0, 30, 3.0)]])

    assert [(s["t"], s["tps"], s["latency_ms"]) for s in summed] == [(1.0, 40, 2.5)]


def test_live_sum_emits_a_second_once_all_processes_reported_it():
    emitted = []
    live = LiveSum(2, emitted.append)
    live.add(0, line(1.0, 10, 1.0))
    live.add(0, line(2.0, 10, 1.0))
    assert emitted == []
    live.add(1, line(1.0, 5, 1.0))

    assert [(e["t"], e["tps"]) for e in emitted] == [(1.0, 15)]
