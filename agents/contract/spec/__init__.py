"""What a job asks for: the job spec (`document`), its fields declared once (`fields`),
the pgbench options an older pgbench lacks (`pgbench_versions`), the disk a dataset
needs (`space`) and the run manifest that replays a job without the lab (`manifest`)."""
