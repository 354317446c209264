"""Measurements of a deployment's parts: transfer/ (one request's KV between real ranks, `pdctl bench-transfer`).

Kept out of the packages the engine imports: benchmark code never loads with a server.
"""
