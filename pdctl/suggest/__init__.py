"""`pdctl suggest`: the PD topology to run under TTFT/ITL targets (docs/suggest.md).

AIConfigurator's model predicts what each worker layout does (pdctl.suggest.aic, its full result set, the
same-TP gate lifted where SGLang runs heterogeneous TP); pdctl adds what it knows: the KV transfer of one
request on the link (kv, link), SGLang's rules on each candidate's topology (judge), and writes the best as a
topology with its prediction (deployment, output). Modules import aiconfigurator and pandas lazily.
"""
