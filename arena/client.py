"""The client SDK, as the server's package has always offered it: `arena_client` (the
`arena-client` distribution in clients/python, the one copy of its code) under the name
``arena.client``, the same classes."""

from arena_client import *  # noqa: F403
from arena_client import __all__ as __all__
