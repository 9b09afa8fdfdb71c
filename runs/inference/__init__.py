"""Statistical inference, pure Python and numbers only (no models, no Django): intervals
and tests on logs (`stats`), rank-based ones (`ranks`), equivalence, variance split
between runs and seconds, steady state within a window, change points in a series.
runs/analysis applies them to the lab's runs and points.
"""
