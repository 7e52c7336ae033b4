"""One board's life on a node: its actor, mailbox, supervisor and the one path that loads it."""
