"""Measure where the spread of a short select-only pgbench comes from on this machine.

Several fresh clusters (initdb, pgbench -i, a warm-up) each run the same point a few
times; every run reports tps per second (-P 1). Printed as JSON: the between-cluster
CV (of the cluster means), the within-cluster CV (of the run means around their
cluster's mean) and the per-second CV (of the seconds around their run's mean), the
figures the calibration simulation of tests/runs/analysis/test_verdicts_calibration.py uses
(docs/benchmarks.md). Usage: .venv/bin/python scripts/measure_variance.py
[clusters] [runs] [seconds]
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.config import DEFAULT_OS_USER, AgentConfig  # noqa: E402
from agents.postgres.cluster.lifecycle import Cluster  # noqa: E402
from agents.postgres.installs.ensure import ensure_install  # noqa: E402
from agents.postgres.installs.inventory import Install  # noqa: E402
from agents.postgres.osuser import OsUser, ensure_os_user  # noqa: E402

SCALE, CLIENTS, WARM_UP_SECONDS = 10, 1, 5
PROGRESS = re.compile(r"progress: [\d.]+ s, ([\d.]+) tps")


def pgbench(cluster: Cluster, user: OsUser, args: list[str]) -> str:
    argv = [str(cluster.binaries.program("pgbench")), *args]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        **user.subprocess_kwargs(**cluster.client_env()),
    )
    return done.stderr + done.stdout


def per_second_tps(cluster: Cluster, user: OsUser, seconds: int) -> list[float]:
    output = pgbench(
        cluster,
        user,
        ["-n", "-S", "-M", "prepared", "-c", str(CLIENTS), "-T", str(seconds), "-P", "1"],
    )
    return [float(tps) for tps in PROGRESS.findall(output)]


def one_cluster(
    install: Install, user: OsUser, root: Path, number: int, runs: int, seconds: int
) -> list[list[float]]:
    with Cluster(install, user, root, job_id=f"variance-{number}") as cluster:
        cluster.initdb()
        cluster.start()
        try:
            pgbench(cluster, user, ["-i", "-q", "-s", str(SCALE)])
            per_second_tps(cluster, user, WARM_UP_SECONDS)
            return [per_second_tps(cluster, user, seconds) for _ in range(runs)]
        finally:
            cluster.destroy()


def variance_structure(clusters: list[list[list[float]]]) -> dict[str, float]:
    """CVs of the three levels (standard deviations of log values, variance components)."""
    run_means = [[float(np.mean(run)) for run in cluster] for cluster in clusters]
    cluster_means = [float(np.mean(np.log(means))) for means in run_means]
    within = [
        np.log(m) - mean
        for means, mean in zip(run_means, cluster_means, strict=True)
        for m in means
    ]
    seconds = [
        np.log(s) - np.log(np.mean(run)) for cluster in clusters for run in cluster for s in run
    ]
    runs_per_cluster = len(run_means[0])
    within_var = float(np.sum(np.square(within)) / (len(within) - len(clusters)))
    # One-way ANOVA estimate: the spread of cluster means less what their runs bring.
    between_var = max(0.0, float(np.var(cluster_means, ddof=1)) - within_var / runs_per_cluster)
    return {
        "between_cluster_cv": float(np.sqrt(between_var)),
        "within_cluster_cv": float(np.sqrt(within_var)),
        "per_second_cv": float(np.std(seconds, ddof=1)),
        "clusters": len(clusters),
        "runs_per_cluster": runs_per_cluster,
        "mean_tps": float(np.mean([np.mean(m) for m in run_means])),
    }


def main() -> None:
    clusters, runs, seconds = (
        int(a) for a in (sys.argv[1:] + ["4", "4", "15"][len(sys.argv) - 1 :])
    )
    install = ensure_install("16.15", "prebuilt", AgentConfig().cache_dir)
    user = ensure_os_user(DEFAULT_OS_USER)
    root = Path(tempfile.mkdtemp(prefix="bl-var-", dir="/tmp"))
    root.chmod(0o755)
    measured = [one_cluster(install, user, root, n, runs, seconds) for n in range(clusters)]
    found = {"per_second_tps": measured, **variance_structure(measured)}
    sys.stdout.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main()
