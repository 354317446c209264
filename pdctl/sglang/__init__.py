"""Facts about SGLang itself, per release: flag tables, command-line parsing, settings, rule texts.

- versions.py: version strings, the releases with flag tables, which version judges a topology
- table.py + flags/: SGLang's own parser dumped per release (scripts/sglang-flags/generate.py)
- argv.py: parse a rendered command with a table (pure Python; SGLang is never imported)
- settings.py: what a process runs with (parsed flags + the environment variables SGLang reads)
- messages.py: SGLang's words for what it refuses (one source for compat, the reference engine, plan)
- stages.py, facts.py: where SGLang fails, and what changed in which release
"""
