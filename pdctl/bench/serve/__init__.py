"""`pdctl bench serve`: serving sweeps of a deployment against a control (sweep, session, tool, metrics,
compare, results, report); targets resolves where the candidate and the control run."""
