"""The BenchLab domain: experiments, runs, results and the agents that produce them."""
