"""What the numbers say about runs: comparisons, verdicts, validity warnings, tables.

Plain data in and out (no figures): charts and pages read what is computed here; the
statistical methods themselves are in runs/inference.
"""
