"""`pdctl bench-transfer`: one request's KV moved between real prefill and decode ranks over NIXL/Mooncake.

pdctl.plan.request (what to move, from a topology), rankmem.py (per-rank KV memory), packed.py (the
gather/scatter comparison path), peer.py (the decode ranks' process), run.py (the driver and its figures).
"""
