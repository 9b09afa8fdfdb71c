"""What the numbers say: statistics, comparisons, validity warnings, change points, tables.

Plain data in and out (no figures): charts and pages read what is computed here.
"""
