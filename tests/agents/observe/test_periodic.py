"""The sampling schedule of PeriodicSampler, on a clock the tests control."""

import threading
import time

import pytest

from agents.contract.reports.results import Sample
from agents.observe.clock import SystemClock
from agents.observe.periodic import PeriodicSampler, SamplersTogether
from tests.agents.observe.fakes import FakeClock, wait_until

INTERVAL = 0.25


class TickSampler(PeriodicSampler):
    """Samples only the time; each sample takes `sample_seconds` of (fake) time,
    the baseline `begin_seconds`.

    After `last_tick` it ends sampling as a sampler does when its source goes
    away; at `failing_tick` it raises as a buggy sampler would.
    """

    def __init__(
        self,
        clock: FakeClock,
        sample_seconds: float = 0.0,
        begin_seconds: float = 0.0,
        last_tick: float = float("inf"),
        failing_tick: float = float("inf"),
    ):
        super().__init__(INTERVAL, clock=clock)
        self.fake_clock = clock
        self.sample_seconds = sample_seconds
        self.begin_seconds = begin_seconds
        self.last_tick = last_tick
        self.failing_tick = failing_tick

    def _begin(self) -> bool:
        self.fake_clock.spend(self.begin_seconds)
        return True

    def _sample(self) -> Sample | None:
        t = self.elapsed()
        if t / INTERVAL > self.last_tick:
            return None
        if t / INTERVAL >= self.failing_tick:
            raise KeyError("cpu")
        self.fake_clock.spend(self.sample_seconds)
        return {"t": t}


def ticks(samples: list[Sample]) -> list[float]:
    return [sample["t"] / INTERVAL for sample in samples]


def test_ticks_are_aligned_to_the_start_and_come_one_interval_apart() -> None:
    clock = FakeClock()
    sampler = TickSampler(clock)
    sampler.start()
    clock.run_for(1.1)
    samples = sampler.stop()
    assert ticks(samples) == [1, 2, 3, 4]
    assert clock.waits[:4] == [INTERVAL] * 4


def test_slow_baseline_does_not_shift_the_ticks_off_the_start() -> None:
    clock = FakeClock()
    sampler = TickSampler(clock, begin_seconds=INTERVAL / 2)
    sampler.start()
    clock.run_for(0.6)
    assert ticks(sampler.stop()) == [1, 2]
    assert clock.waits[0] == INTERVAL / 2


def test_first_sample_comes_one_interval_after_start_not_at_once() -> None:
    clock = FakeClock()
    sampler = TickSampler(clock)
    sampler.start()
    clock.run_for(INTERVAL / 2)
    assert sampler.stop() == []


def test_slow_sample_skips_missed_ticks_instead_of_bunching() -> None:
    clock = FakeClock()
    sampler = TickSampler(clock, sample_seconds=1.25 * INTERVAL)
    sampler.start()
    clock.run_for(1.3)
    samples = sampler.stop()
    assert ticks(samples) == [1, 3, 5]
    # After each slow sample the wait reaches the next tick on the schedule:
    # not a full interval (drift) and not zero (a late, bunched sample).
    assert clock.waits[1:3] == [0.75 * INTERVAL, 0.75 * INTERVAL]


def test_slow_callback_delays_one_tick_and_the_schedule_holds() -> None:
    clock = FakeClock()
    sampler = TickSampler(clock)
    sampler.on_sample = lambda sample: clock.spend(1.5 * INTERVAL if sample["t"] == 0.5 else 0)
    sampler.start()
    clock.run_for(1.6)
    assert ticks(sampler.stop()) == [1, 2, 4, 5, 6]


def test_stop_while_waiting_ends_the_loop_without_another_sample() -> None:
    clock = FakeClock()
    sampler = TickSampler(clock)
    sampler.start()
    clock.run_for(0.6)
    assert ticks(sampler.stop()) == [1, 2]
    assert not sampler.running
    assert clock.monotonic() == 1000.6


def test_sample_returning_none_ends_the_loop_on_its_own() -> None:
    clock = FakeClock()
    sampler = TickSampler(clock, last_tick=3)
    sampler.start()
    clock.allow(10.0)
    wait_until(lambda: not sampler.running)
    assert ticks(sampler.stop()) == [1, 2, 3]
    assert sampler.error is None


def test_bug_in_a_sample_is_kept_as_the_error_with_earlier_samples(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    sampler = TickSampler(clock, failing_tick=3)
    sampler.start()
    clock.allow(10.0)
    wait_until(lambda: not sampler.running)
    assert ticks(sampler.stop()) == [1, 2]
    assert sampler.error == "KeyError: 'cpu'"
    assert "unexpected error" in caplog.text


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        PeriodicSampler(interval=0)


def test_system_clock_wait_ends_at_once_when_stop_is_set() -> None:
    stop = threading.Event()
    stop.set()
    before = time.monotonic()
    assert SystemClock().wait(3600, stop) is True
    assert time.monotonic() - before < 1.0


def test_stop_ends_a_real_clock_sampler_promptly_mid_interval() -> None:
    sampler = PeriodicSampler(interval=3600)
    sampler.start()
    before = time.monotonic()
    assert sampler.stop() == []
    assert time.monotonic() - before < 1.0
    assert sampler.error is None


def test_samplers_together_take_their_samples_on_one_thread_and_deliver_them_as_one() -> None:
    clock = FakeClock()
    host, server = TickSampler(clock), TickSampler(clock)
    delivered: list[Sample] = []
    together = SamplersTogether({"host": host, "server": server}, INTERVAL, delivered.append, clock)
    together.start()
    clock.run_for(0.8)
    assert [sorted(sample) for sample in together.stop()] == [["host", "server"]] * 3
    assert delivered == [{"host": {"t": t}, "server": {"t": t}} for t in (0.25, 0.5, 0.75)]
    assert ticks(host.stop()) == ticks(server.stop()) == [1, 2, 3]
    assert not host.running and not server.running  # no thread of their own


def test_a_member_that_ends_or_fails_is_left_out_and_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    host, server, client = (
        TickSampler(clock),
        TickSampler(clock, last_tick=1),
        TickSampler(clock, failing_tick=2),
    )
    together = SamplersTogether(
        {"host": host, "server": server, "client": client}, INTERVAL, clock=clock
    )
    together.start()
    clock.run_for(1.1)
    assert [sorted(sample) for sample in together.stop()] == [
        ["client", "host", "server"],
        ["host"],
        ["host"],
        ["host"],
    ]
    assert ticks(host.stop()) == [1, 2, 3, 4]
    assert ticks(server.stop()) == [1] and server.error is None
    assert ticks(client.stop()) == [1] and client.error == "KeyError: 'cpu'"
    assert "the client sampler stopped by an unexpected error" in caplog.text


def test_samplers_together_end_when_every_member_has_ended() -> None:
    clock = FakeClock()
    together = SamplersTogether({"server": TickSampler(clock, last_tick=2)}, INTERVAL, clock=clock)
    together.start()
    clock.allow(10.0)
    wait_until(lambda: not together.running)
    assert len(together.stop()) == 2
    assert together.error is None
