"""KV transfer between prefill and decode ranks: backends (NIXL, Mooncake), bootstrap, sender/receiver, bench.

Nothing heavy is imported here: each backend module imports its library only when a backend is created.
"""
