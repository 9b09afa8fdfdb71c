"""The server half of a run with a client host: its points are measured on the client.

The server half drives the sweep (order, CHECKPOINT/VACUUM between points, its
own host and server samplers around each point) and asks the client half to
measure each point (`measure`: index, clients, repeat); the client builds the
pgbench command from its own signed job. What the client reports arrives as
messages and leaves as this run's events: its progress lines as they are, its
host samples as `client_host` samples, its log lines named after it. The kept
point is the client's (tps, argv, output, percentiles) with both hosts' samples.
"""

from collections.abc import Callable
from typing import Any, cast

from agents.contract.errors import JobError
from agents.contract.reports.cpu_profiles import CpuProfileResult
from agents.contract.reports.results import PointResult
from agents.observe.cpu_profile import no_cpu_profile
from agents.observe.noise import point_noise
from agents.observe.point_counters import point_counters
from agents.pair.link import Message, PairLink
from agents.sweep.context import PointBase, PointContext


class RemotePoints:
    """Measures points through `link`; relays the client's events through the context's
    reporter, and samples this host and its server with the context's samplers."""

    def __init__(
        self, link: PairLink, context: PointContext, should_cancel: Callable[[], bool]
    ) -> None:
        self.link = link
        self.context = context
        self.reporter = context.reporter
        self.should_cancel = should_cancel

    def cpu_profile_point(self, index: int, clients: int, perf: str) -> CpuProfileResult:
        """Not recorded: pgbench runs on the client host, and the client half has no
        unmeasured run to offer."""
        return no_cpu_profile(
            "a run with a client host has no CPU-profile pass yet", index, clients
        )

    def run_point(self, index: int, total: int, clients: int, repeat: int) -> PointResult:
        """Measure one point on the client, sampling this host and its server meanwhile."""
        message = f"point {index + 1} of {total}: {clients} clients, run {repeat}, on the client"
        self.reporter.status("running", message)
        point_base: PointBase = {"point": index, "clients": clients, "repeat": repeat}

        def measure() -> Message:
            # Sent once the counters' start reading is taken and the samplers run: the
            # client's pgbench must not start before its window's first reading.
            self.link.send("measure", index=index, total=total, clients=clients, repeat=repeat)
            return self.link.wait_for({"point"}, self.should_cancel, None, self.relay)

        answer, samples, agent_cpu_s = self.context.sampled(point_base, measure)
        point: dict[str, Any] = {
            **answer["point"],
            "client_host_samples": answer["point"].get("host_samples") or [],
            "host_samples": samples["host"],
            "server_samples": samples["server"],
            "agent_cpu_s": round(agent_cpu_s, 4),
        }
        if samples["counters"] is not None:
            point["counters"] = point_counters(samples["counters"], point)
        point["noise"] = point_noise(samples["cpu"], point, pgbench_here=False)
        if answer.get("error"):
            self.reporter.keep_failed_point(_as_point(point))
            raise self.client_error(answer["error"])
        self.reporter.keep_point(_as_point(point))
        return _as_point(point)

    def warm_up(self, clients: int, seconds: int) -> None:
        message = f"warming up for {seconds} s on the client at {clients} clients"
        self.reporter.step("warmup", message)
        self._on_client("warmup", clients)

    def calibrate(self, clients: int) -> None:
        self.reporter.step("calibrate", f"measuring the tps on the client at {clients} clients")
        self._on_client("calibrate", clients)

    def _on_client(self, kind: str, clients: int) -> None:
        """Ask the client for an unlogged run (warm-up or calibration), wait until it ran."""
        self.link.send(kind, clients=clients)
        answer = self.link.wait_for({"warmed"}, self.should_cancel, None, self.relay)
        if answer.get("error"):
            raise self.client_error(answer["error"])

    def relay(self, message: Message) -> None:
        """The client's events as this run's: progress as is, host samples as client_host."""
        if message["kind"] != "event":
            return
        event_type, data = message["type"], dict(message["data"])
        if event_type == "sample" and "host" in data:
            data["client_host"] = data.pop("host")
        elif event_type == "log":
            data["message"] = f"client host {self.link.peer_name}: {data.get('message', '')}"
        elif event_type != "progress":
            return
        self.reporter.emit(event_type, data)

    def client_error(self, error: dict[str, Any]) -> JobError:
        message = f"on the client host {self.link.peer_name}: {error.get('message', '')}"
        return JobError(error.get("code", "pgbench_failed"), message, field=error.get("field"))


def _as_point(point: dict[str, Any]) -> PointResult:
    """The client sent a complete PointResult (agents.sweep.as_point_result); samples added."""
    return cast(PointResult, point)
