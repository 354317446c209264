"""Logprob parity of a PD deployment against a reference server (`pdctl parity`).

Modules: `prompts` (the edge-length prompt suite), `client` (the HTTP calls SGLang's parity kit makes),
`compare` (one candidate/reference comparison), `results` (per-mode results, control floor, verdict, JSON),
`runner` (cold / warm / concurrent modes), `endpoints` (where the candidate and reference are), `report`
(HTML report with an embedded plot).
"""
