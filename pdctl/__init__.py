"""pdctl: check, launch, evaluate and parity-test prefill/decode disaggregated SGLang deployments."""

__version__ = "0.1.0"
