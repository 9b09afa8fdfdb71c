"""Writes about the hosts the agents run on: enrollment, their own events (registration,
heartbeats), liveness, reconciling what they report, and their storage space."""
