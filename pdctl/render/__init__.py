"""The deployment object: every process of a topology as data (argv, env, wrapper, node, ports, addresses)."""
