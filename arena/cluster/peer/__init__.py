"""Talking to the other nodes of a cluster: the protocol (`protocol`, its messages as values,
without I/O) and the client side (`client`, one multiplexed connection per peer node). The server
side is the `/v1/peer` route (`arena.api.peer`), which needs the `Arena` service."""
