"""KV transfer libraries behind one small protocol: pdctl.transfer.backends (NIXL, Mooncake).

Nothing heavy is imported here: each backend module imports its library only when a backend is created.
Who moves which bytes lives with the users of a backend: the reference engine's PD roles
(pdctl.reference.roles) and `pdctl bench-transfer` (pdctl.bench.transfer).
"""
