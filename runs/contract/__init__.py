"""The lab's side of agents.contract: model choices from its vocabularies, its declared
spec fields, the order an experiment's runs execute in, and the transport to the agents."""
