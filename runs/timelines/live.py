"""What the live stream sends of a run's server samples: the checkpoints each new sample
starts or ends, found by the rule the kept digest uses (runs/analysis/validity.py), so
the live page and the finished one mark the same checkpoints."""

from runs.analysis.validity import checkpoint_events
from runs.models import ServerSample

CheckpointEdge = dict[str, str]


class LiveCheckpoints:
    """Follows the latest point's server samples, from those the page was drawn with."""

    def __init__(self, drawn: list[ServerSample]):
        """`drawn`: the samples of the page's latest point, whose checkpoints it shows."""
        self.point = drawn[-1].point if drawn else None
        self.samples = [s for s in drawn if s.point == self.point]
        self.sent = len(checkpoint_events(drawn[-1].point, self.samples)) if drawn else 0

    def add(self, sample: ServerSample) -> list[CheckpointEdge]:
        """The checkpoint edges (kind: timed, requested or running; edge: start or end)
        seen at this sample, the next of its point."""
        if sample.point != self.point:
            self.point, self.samples, self.sent = sample.point, [], 0
        self.samples.append(sample)
        events = checkpoint_events(sample.point, self.samples)
        new, self.sent = events[self.sent :], len(events)
        return [{"kind": e.kind, "edge": e.edge} for e in new]
