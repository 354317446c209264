# pdctl — the two commands a user needs are `make demo` and `make test`.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.pdctl-installed
# SGLang's own code, importable on CPU, as an oracle for tests (its parser, its transfer math) and as the load
# generator of `pdctl bench serve` (sglang.bench_serving): a side venv.
SGLANG_VENV  ?= .venv-sglang
SGLANG_STAMP := $(SGLANG_VENV)/.pdctl-sglang-installed
export PDCTL_SGLANG_PYTHON ?= $(abspath $(SGLANG_VENV))/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Every install goes through scripts/pip-install.sh: uv (pinned, installed into .venv first) with the machine's pip
# configuration handed over, which unpacks each wheel once and installs in parallel (docs/testing.md: the install
# times on a fresh clone, pip vs uv). Without .venv/bin/uv the script falls back to pip.
UV_VERSION   := 0.13.9
export PDCTL_UV := $(abspath $(BIN))/uv
PIP_INSTALL  := bash scripts/pip-install.sh

.PHONY: install system-deps sglang-env sglang-overlays resolution-sweep sglang-flags test test-fast lint demo bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(BIN)/uv: | $(BIN)/python
	$(BIN)/pip install -q uv==$(UV_VERSION)

# torch first and pinned to the CPU build, so that no later package pulls a CUDA build.
$(STAMP): pyproject.toml | $(BIN)/uv
	$(PIP_INSTALL) $(BIN)/python -q --upgrade pip
	$(PIP_INSTALL) $(BIN)/python -q torch==2.13.0 || \
	  $(PIP_INSTALL) $(BIN)/python -q torch --index-url https://download.pytorch.org/whl/cpu
	$(PIP_INSTALL) $(BIN)/python -q -e '.[engine,eval,test,suggest,kubernetes]' ruff
	$(PIP_INSTALL) $(BIN)/python -q --no-deps nixl==1.5.1
	touch $(STAMP)

install: system-deps $(STAMP)

$(SGLANG_STAMP): scripts/sglang-env/build.sh scripts/sglang-env/requirements.txt scripts/sglang-env/server-requirements.txt | $(BIN)/uv
	bash scripts/sglang-env/build.sh $(SGLANG_VENV) 0.5.23
	touch $(SGLANG_STAMP)

sglang-env: $(SGLANG_STAMP)

# Older SGLang releases whose own parser the differential tests hold pdctl's flag tables against
# (tests/support/sglang_env.py::ORACLE_RELEASES): each in an overlay over the side venv, .pdctl/sglang-flags/<v>
# (its wheel and the pure-Python pins it imports; ~1-3 min each, once).
SGLANG_ORACLE_RELEASES := 0.5.0rc2 0.5.5.post2 0.5.8 0.5.8.post1 0.5.12
# Older releases whose start-up argument resolution tests/sglang/test_resolution.py runs
# (tests/support/sglang_env.py::RESOLUTION_RELEASES besides 0.5.23; ~2 min and ~200 MB each, once).
SGLANG_RESOLUTION_RELEASES := 0.5.22 0.5.21 0.5.20 0.5.19 0.5.18 0.5.17 0.5.16
sglang-overlays: install sglang-env
	$(BIN)/python scripts/sglang-flags/generate.py --overlays-only $(SGLANG_ORACLE_RELEASES) $(SGLANG_RESOLUTION_RELEASES)

# The full start-up differential: 400 generated topologies per release (docs/check-compat.md has the counts).
resolution-sweep: install sglang-env sglang-overlays
	PDCTL_RESOLUTION_SAMPLE=400 $(BIN)/python -m pytest -q -s tests/sglang/test_resolution.py

# Regenerate pdctl/sglang/flags/sglang-X.json (SGLang's parser per release) from the released wheels (~4 min).
sglang-flags: install sglang-env
	$(BIN)/python scripts/sglang-flags/generate.py $(SGLANG_VERSIONS)

# apt packages: libibverbs1 (Mooncake imports it), openssh-server (SSH executor tests), chromium (parity
# report test), slurmctld/slurmd/slurm-client/munge (real single- and multi-node Slurm for the slurm executor
# tests), iproute2/util-linux/curl (namespaced multi-host tests).
system-deps:
	@bash scripts/system-deps.sh

# make test fails when pytest reports a failure or an error; CI (.ci/run) also sets PDCTL_STRICT_TESTS=1,
# under which a skipped test fails the run too (tests/conftest.py).
# Both run on PYTEST_WORKERS pytest-xdist workers (0: in one process); tests/conftest.py keeps each module on one
# worker, and each of its GROUPS (the modules that hold the CPU; those that build Slurm clusters or namespaced
# hosts) on one worker, one module at a time.
PYTEST_WORKERS ?= 2
PYTEST_XDIST := -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder
test: install sglang-env sglang-overlays
	$(BIN)/python -m pytest -q $(PYTEST_XDIST) $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest -q $(PYTEST_XDIST) -m "not e2e"

# ruff; import-linter's layer contracts ([tool.importlinter] in pyproject.toml); vulture's dead code.
# tests/test_layers.py runs the last two in `make test` too, so CI enforces them.
lint: install
	$(BIN)/ruff check pdctl tests benchmarks
	$(BIN)/lint-imports --no-cache
	$(BIN)/vulture

demo: install
	bash scripts/demo.sh

bench: install sglang-env
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) $(SGLANG_VENV) .pdctl build *.egg-info
