"""A run's timelines as data: samples on one time axis, reduced for charts, stored as digests.

Computing only: runs.charts draws what is built here and nothing here imports it.
"""
