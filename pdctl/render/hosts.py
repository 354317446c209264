"""Is a node's host this machine? The local executor can only start processes here.

A node without `ssh:` is started by the local executor; if its host is another machine, the process would
run here with a `--host` it cannot bind, or worse bind a wildcard and serve the wrong address. The test is
the one the kernel answers: an address is this machine's iff a socket can be bound to it. Rendering asks it
too (pdctl.render.kinds.own_python: a node that is this machine runs pdctl's processes with this interpreter),
so it sits here, below the executors and launch's gate that refuse such a node.
"""

from __future__ import annotations

import socket
from functools import lru_cache

from pdctl.topology.placement import is_loopback


@lru_cache(maxsize=64)
def is_local_host(host: str) -> bool:
    """True when HOST (a name or an address) resolves to an address of this machine."""
    if is_loopback(host):
        return True
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, addr in infos:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((addr[0], 0))
            except OSError:
                continue
            return True
    return False
