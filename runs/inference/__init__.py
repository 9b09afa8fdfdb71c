"""Statistical inference, pure Python and numbers only (no models, no Django): intervals
and tests on logs (`stats`), rank-based ones (`ranks`), rounds compared in pairs
(`paired`), equivalence, variance split between runs and seconds, steady state within a
window, change points in a sequence, a sequential plan's looks (`spending`, `look_tests`)
and a bisection's two levels (`levels`). runs/analysis applies them to the lab's runs and
points.
"""
