"""A run's CPU-profile pass in the lab: stored apart from its measured points
(`store`), turned into flame-graph trees and their differences (`trees`), each frame's
change tested against sampling noise (`changes`), chosen for the run and compare pages
(`pages`). Drawing is runs/charts/flames.py."""
