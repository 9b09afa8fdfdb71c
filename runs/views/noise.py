"""A host's noise: the host page's noise view, and the rounds an effect needs on a host
(the schedule form asks for each host it schedules on)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404

from runs.charts.figures import figure_json
from runs.charts.noise import canary_figure
from runs.host_noise import (
    RoundsSpread,
    canary_bands,
    recent_canaries,
    recent_noisy_points,
    rounds_needed,
    rounds_spread,
)
from runs.inference.designs import DUET, DesignRounds
from runs.inference.stats import MAX_REPEATS_ADVISED
from runs.models import Host

DEFAULT_EFFECT_PCT = 5.0
MAX_EFFECT_PCT = 100.0
DUET_UNMEASURED = (
    "not measured yet: this host has no duet experiment in rounds. Schedule one (the "
    "Schedule form's duet option, two cells, a few rounds; an A/A will do) and the ratios "
    "of its simultaneous windows size this slot"
)
UNMEASURED = "not measured yet: this host has no experiment in rounds other than duets"


def host_noise_context(host: Host) -> dict[str, object]:
    """What the host page's noise view shows."""
    canaries = recent_canaries(host)
    bands = canary_bands(host)
    traces, layout = canary_figure(canaries, bands)
    figure = figure_json(traces, layout, f"host-{host.pk}-canary") if canaries else None
    return {
        "canary_bands": bands,
        "canary_figure": figure,
        "noisy_points": recent_noisy_points(host),
        "rounds_spread": rounds_spread(host),
        "duet_spread": rounds_spread(host, duet=True),
    }


def parse_effect(raw: str | None) -> float | None:
    """The effect asked about, in percent (0 < effect <= MAX_EFFECT_PCT); None when not."""
    if raw is None or raw == "":
        return DEFAULT_EFFECT_PCT
    try:
        effect = float(raw)
    except ValueError:
        return None
    return effect if 0 < effect <= MAX_EFFECT_PCT else None


def spread_document(spread: RoundsSpread | None) -> dict[str, object] | None:
    """What a spread rests on: its experiments and rounds, its two sds, a round's time."""
    if spread is None:
        return None
    return {
        "experiments": spread.experiments,
        "pairs": spread.variance.pairs,
        "paired_sd_pct": round(spread.paired_sd_pct, 2),
        "unpaired_sd_pct": round(spread.unpaired_sd_pct, 2),
        "round_seconds": None if spread.round_seconds is None else round(spread.round_seconds),
    }


def design_document(found: DesignRounds, spread: RoundsSpread | None) -> dict[str, object]:
    """One design's rounds and their time (a round's median wall time in that design)."""
    seconds = (
        found.rounds * spread.round_seconds
        if found.rounds is not None and spread is not None and spread.round_seconds is not None
        else None
    )
    design: dict[str, object] = {
        "design": found.design,
        "rounds": found.rounds,
        "seconds": None if seconds is None else round(seconds),
        "measured": found.measured,
    }
    if found.design == DUET:
        design["note"] = (
            f"from {spread.variance.pairs} duet rounds of {spread.experiments} experiment"
            f"{'' if spread.experiments == 1 else 's'}: a round's ratio of two windows at once "
            f"spreads {spread.paired_sd_pct:.1f} %; a round is one window"
            if spread is not None
            else DUET_UNMEASURED
        )
    elif not found.measured:
        design["note"] = UNMEASURED
    return design


def rounds_document(
    host: Host, spread: RoundsSpread | None, duet_spread: RoundsSpread | None, effect_pct: float
) -> dict[str, object]:
    """The rounds an effect needs on `host`, per design, with the spreads they rest on
    (`spread`: of its experiments in rounds, `duet_spread`: of its duet experiments)."""
    designs: list[dict[str, object]] = []
    if spread is not None or duet_spread is not None:
        designs = [
            design_document(found, duet_spread if found.design == DUET else spread)
            for found in rounds_needed(spread, duet_spread, effect_pct)
        ]
    return {
        "host": host.name,
        "effect_pct": effect_pct,
        "max_rounds": MAX_REPEATS_ADVISED,
        "spread": spread_document(spread),
        "duet_spread": spread_document(duet_spread),
        "designs": designs,
    }


@login_required
def host_rounds_needed(request: HttpRequest, pk: int) -> JsonResponse:
    """GET ?effect_pct=5: the rounds that effect needs on the host in each design, and
    their time, from the spread of its recent experiments' rounds and of its duet
    experiments' (`spread` and `duet_spread` null, `designs` empty: none yet)."""
    host = get_object_or_404(Host, pk=pk)
    effect = parse_effect(request.GET.get("effect_pct"))
    if effect is None:
        message = f"effect_pct must be a number above 0 and at most {MAX_EFFECT_PCT:g}"
        return JsonResponse({"error": message}, status=400)
    duet_spread = rounds_spread(host, duet=True)
    return JsonResponse(rounds_document(host, rounds_spread(host), duet_spread, effect))
