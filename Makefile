# pdctl — the two commands a user needs are `make demo` and `make test`.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.pdctl-installed
export PIP_DISABLE_PIP_VERSION_CHECK=1

.PHONY: install system-deps test test-fast lint demo bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch first and pinned to the CPU build, so that no later package pulls a CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0 || $(BIN)/pip install -q torch --index-url https://download.pytorch.org/whl/cpu
	$(BIN)/pip install -q -e '.[engine,eval,test]' ruff
	$(BIN)/pip install -q --no-deps nixl==1.5.1
	touch $(STAMP)

install: system-deps $(STAMP)

# apt packages: libibverbs1 (Mooncake imports it), openssh-server (SSH executor tests), chromium (parity
# report test), slurmctld/slurmd/slurm-client/munge (a real single-node Slurm for the slurm executor test).
system-deps:
	@bash scripts/system-deps.sh

test: install
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not e2e"

lint: install
	$(BIN)/ruff check pdctl tests benchmarks

demo: install
	bash scripts/demo.sh

bench: install
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .pdctl build *.egg-info
