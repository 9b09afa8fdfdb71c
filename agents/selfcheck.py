"""Fidelity benchmark: does running pgbench through the agent change the numbers?

In one cluster, the same pgbench command runs alternately through the agent
(progress parsing, host and server samplers, events) and bare (plain
subprocess, nothing watching), several rounds, the order flipped every round.
It reports the tps ratio agent/bare and the agent's own CPU time during its
measured windows. Targets: ratio within 2 % of 1.0, agent CPU under 1 % of
the window. It is a benchmark, not a unit test: run it on a quiet machine.
"""

import logging
import shutil
import statistics
import subprocess
import time

from agents.config import AgentConfig
from agents.events import EventEmitter
from agents.job import Job
from agents.pgbench.parse import parse_output
from agents.postgres.osuser import chown_tree
from agents.sweep import Sweep

logger = logging.getLogger(__name__)

RATIO_TOLERANCE = 0.02
CPU_BUDGET_PERCENT = 1.0
CLIENTS = 2


def selfcheck_spec(duration_s: int) -> dict:
    return {
        "version": 1,
        "run_id": "selfcheck",
        "postgres": {"version": "16", "source": "auto"},
        "dataset": {"scale": 10},
        "workload": {"scripts": [{"builtin": "select-only", "weight": 1}], "no_vacuum": True},
        "sweep": {"clients": [CLIENTS], "duration_s": duration_s, "warmup_s": duration_s},
    }


def run_selfcheck(config: AgentConfig, rounds: int = 3, duration_s: int = 20, log=None) -> dict:
    """Interleave agent and bare runs; return the measurements and whether targets are met."""
    log = log or (lambda message: logger.info(message))
    job = Job(selfcheck_spec(duration_s), config, EventEmitter([]), lambda: False)
    try:
        install, spec = job.prepare()
        sweep = Sweep(job, install, spec)
        log("preparing the dataset (pgbench -i -s 10)")
        sweep.prepare_dataset()
        log(f"warming up for {duration_s} s")
        sweep.warm_up(CLIENTS)
        agent_runs, bare_runs = [], []
        for round_no in range(rounds):
            order = ("agent", "bare") if round_no % 2 == 0 else ("bare", "agent")
            for kind in order:
                run = _agent_run(sweep, round_no) if kind == "agent" else _bare_run(sweep, round_no)
                (agent_runs if kind == "agent" else bare_runs).append(run)
                log(f"round {round_no + 1} {kind}: {run['tps']:.1f} tps")
    finally:
        job.teardown()
    return _report(agent_runs, bare_runs, install.version, duration_s)


def _agent_run(sweep: Sweep, round_no: int) -> dict:
    point = sweep.run_point(round_no, round_no + 1, CLIENTS, round_no + 1)
    return {"tps": point["tps"], "seconds": point["seconds"], "agent_cpu_s": point["agent_cpu_s"]}


def _bare_run(sweep: Sweep, round_no: int) -> dict:
    log_dir = sweep.workdir / f"bare-{round_no}"
    log_dir.mkdir(mode=0o700)
    chown_tree(log_dir, sweep.cluster.os_user)
    argv = sweep.run_argv(CLIENTS, log_prefix=log_dir / "pgbench_log")
    env = sweep.cluster.client_env()
    started = time.monotonic()
    finished = subprocess.run(
        argv,
        cwd=sweep.workdir,
        capture_output=True,
        text=True,
        check=True,
        **sweep.cluster.os_user.subprocess_kwargs(**env),
    )
    seconds = time.monotonic() - started
    shutil.rmtree(log_dir)
    parsed = parse_output(finished.stdout + finished.stderr)
    return {"tps": parsed["tps"], "seconds": round(seconds, 3), "argv": argv}


def _report(agent_runs: list[dict], bare_runs: list[dict], version: str, duration_s) -> dict:
    agent_tps = statistics.mean(run["tps"] for run in agent_runs)
    bare_tps = statistics.mean(run["tps"] for run in bare_runs)
    ratio = agent_tps / bare_tps
    cpu_s = sum(run["agent_cpu_s"] for run in agent_runs)
    window_s = sum(run["seconds"] for run in agent_runs)
    cpu_percent = 100.0 * cpu_s / window_s
    return {
        "postgres": version,
        "duration_s": duration_s,
        "clients": CLIENTS,
        "agent_runs": agent_runs,
        "bare_runs": bare_runs,
        "agent_tps_mean": round(agent_tps, 2),
        "bare_tps_mean": round(bare_tps, 2),
        "tps_ratio": round(ratio, 4),
        "agent_cpu_percent_of_window": round(cpu_percent, 3),
        "targets": {"tps_ratio_within": RATIO_TOLERANCE, "agent_cpu_percent_below": 1.0},
        "passed": abs(ratio - 1.0) <= RATIO_TOLERANCE and cpu_percent < CPU_BUDGET_PERCENT,
    }
