"""Live metrics: Prometheus exposition for the reference engine (engine.py) and the readers that
`pdctl status --watch` / `--json` use (scrape: fetch + parse, figures: interval maths, targets: what to
scrape in a run). Names and bucket boundaries are SGLang's (names.py), so one reader serves both engines."""
