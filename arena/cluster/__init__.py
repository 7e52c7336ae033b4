"""Nodes sharing one PostgreSQL journal. For now a node is a cluster of one: its lease on the
schema (`arena.cluster.lease`) is what keeps a second `arena serve` off it, as the data_dir lock
does on sqlite; board ownership epochs, which fence every append, live with the journal store
(`arena.journal.postgresql`)."""
