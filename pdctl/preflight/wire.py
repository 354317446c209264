"""The line markers of preflight's transfer agent protocol: one source for both ends, the agent on the node
(pdctl.bench.transfer.agent) and preflight's side (pdctl.preflight.transfer)."""

READY = "@ready "  # stdout: {"pid", "hostname", "backend"} once the transfer library is imported
TO_PEER = "@>"  # stdout: {"pair", "to": "prefill" | "decode", "msg"} for the pair's other side
RESULT = "@="  # stdout: {"pair", "result"} from a pair's prefill side
BEGIN, END = "@@begin ", "@@end "  # stderr: around a pair's prefill side (the path its bytes took)
