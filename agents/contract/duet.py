"""The duet document: two job specs run at the same time on one host (agents/duet.py
runs it; the lab's runs/services/duet.py sends it). Its fields are described there."""

from typing import Literal, TypedDict

from agents.contract.spec.document import JobSpec

DUET_VERSION: Literal[1] = 1


class DuetDocument(TypedDict):
    """One task carrying both sides of a duet."""

    duet: Literal[1]
    # The lab's id of the duet; both sides' results carry it.
    key: str
    # The first side's run id and token: what the worker names the task by.
    run_id: str
    token: str
    # True: the first side gets the second half of the host's CPUs.
    swapped: bool
    sides: list[JobSpec]
