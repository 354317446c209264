"""pdctl preflight: facts gathered from the actual nodes through their executors (gather, probe), the checks
over them (checks/*, parsers/* for tool outputs), and the cross-node transfer test (transfer).

`pdctl.preflight.runner.run_preflight(deployment, ...) -> PreflightReport` is the API: it reads the rendered
deployment (pdctl.render) and renders nothing; `pdctl preflight` prints it and `pdctl launch` runs it first.
The transfer test imports numpy and the backends only in the processes it starts on the nodes.
"""
