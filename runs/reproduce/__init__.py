"""A run's manifest and the bash script that reproduces it without the lab (script.py),
with a source build rebuilt from its definition (build.py)."""
