"""A run with a client host: the two halves' messages and liveness over Redis (`link`)
and the client half (`client_half`)."""
