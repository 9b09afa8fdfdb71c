"""Plotly figures for the pages, built server-side from computed data and drawn by plotly.js.

Presentation only: these modules read runs.timelines and runs.analysis, and
nothing there imports them back.
"""
