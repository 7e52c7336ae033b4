"""Nodes sharing one PostgreSQL journal: each holds a lease on the schema (`lease`); who may
write a board is granted in its owner row and fences every append (`grants`); where boards live
is placement (`placement`), and what a node does after each read of the leases and owner rows is
a pure plan (`plan`) that its ownership loop carries out (`ownership`)."""
