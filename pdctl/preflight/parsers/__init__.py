"""Pure parsers of what node tools print (nvidia-smi -q, ucx_info -d, /sys/class/infiniband, ip, UCX's
protocol tables, Mooncake's log). No I/O here: preflight gathers the raw text on the nodes, these turn it into
facts, and tests run them on outputs captured from real machines (tests/preflight/data)."""
