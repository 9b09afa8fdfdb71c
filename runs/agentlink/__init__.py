"""The lab's link to the agents, built on agents.contract: model choices from the
contract's vocabularies, its declared spec fields as the lab's columns, the order an
experiment's runs are queued and sent in, and the transport that sends them."""
