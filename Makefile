# gomgr — two commands on a fresh machine: `make run` and `make test`.
# Every target installs what it needs into the local .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# NOTE: this exact pin resolves to the local CPU wheel; any other spec downloads a CUDA build.
TORCH  := torch==2.13.0
MODEL  ?= HuggingFaceTB/SmolLM2-135M-Instruct
PYTEST_ARGS ?=

.PHONY: install run test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[engine,dev]'
	touch $(STAMP)

# NOTE: the engine keeps running after `make run`; `gomgr stop --all` ends it.
run: install
	@$(BIN)/gomgr start $(MODEL)
	@$(BIN)/python -m manager.demo_chat $(MODEL)
	@echo "The engine keeps running behind http://127.0.0.1:$${GOMGR_ROUTER_PORT:-8000}/v1; stop it with: $(BIN)/gomgr stop --all"

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info
