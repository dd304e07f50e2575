# governed-evidence — developer entry points. Everything installs into .venv from the
# hashed lock (requirements/lock.txt); the release-gate tools go into .venv-tools.
#
#   make demo        build the sample index with the real model and run example searches
#   make test        run the test suite
#   make test-fast   the suite without the real model and the slow suites (~3 minutes)
#   make format      reformat and apply ruff's safe fixes (what `make lint` checks)
#   make ci          the release gate (what .ci/run runs), failing on the first red step
#   make lock        regenerate the hashed locks after changing dependencies in pyproject.toml
SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
GE     := $(BIN)/governed-evidence
DEMO_DB := data/demo.sqlite

TOOLS_VENV  := .venv-tools
TOOLS_BIN   := $(TOOLS_VENV)/bin
TOOLS_STAMP := $(TOOLS_VENV)/.installed-stamp
UV          := $(TOOLS_BIN)/uv

# Locks target CPython 3.11 on Linux x86_64 (CI, the container and this kind of machine).
LOCK_FLAGS := --quiet --no-config --generate-hashes --python-version 3.11 \
              --python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" \
              $(if $(UPGRADE),--upgrade)
COVERAGE_MIN := 85
# The workspace's offline advisory database wrapper, when this machine has one.
OSV_LOCAL := ../shared/tools/osv-local
AUDITED_LOCKS := requirements/lock.txt requirements/runtime.txt requirements/build.txt requirements/tools.txt
# Extras both the development lock and the runtime lock carry: tracing (otel) is optional for
# `pip install .`, but the tests exercise it and the image ships it (ADR 0009).
LOCK_EXTRAS := --extra otel
# Extras only the development lock carries: the report's charts (matplotlib, ADR 0016) are
# optional for `pip install .[report]` and left out of the runtime lock and the image, but the
# tests draw them.
DEV_EXTRAS := --extra dev --extra report
# What the runtime lock leaves out (the model-hub client tokenizers declares; see the file).
RUNTIME_OVERRIDES := --overrides requirements/runtime-overrides.txt

# onnxruntime (the default embedder's runtime) otherwise writes a device id and a telemetry
# event store under $HOME; nothing here should phone home.
export ORT_DISABLE_TELEMETRY := 1

CI_STEPS := lock-check lint typecheck audit publication-guard browser
# The long steps share nothing (each test session its own temporary folders, the eval its own
# index, the wheel check a scratch copy, the container an image), so they run in three lanes
# side by side, steps joined by commas running in order within a lane; each step writes its own
# log, printed whole when every lane is done. On 2 cores the whole gate took 2,096 s with these
# steps one after the other and 1,291 s in these lanes (coverage 1,210 s beside hardening then
# the eval gate, 1,244 s): many tests wait on a subprocess, a socket or the disk.
CI_LANES := coverage test-hardening,eval-gate wheel-check,container

.PHONY: browser bench bench-quick bench-http bench-peers bench-scifact install tools demo test coverage format lint typecheck eval-gate audit \
        publication-guard container lock lock-tools lock-check ci clean test-fast wheel-check test-hardening

# Which interpreter made each venv: "<resolved path> <version>" (scripts/check_python.py --id),
# recorded in its stamp. A venv made by another interpreter than $(PYTHON) (say a too-old one
# that failed half-way, leaving a broken .venv) is removed and rebuilt, never reused. A stamp
# from before the id was recorded is judged by the venv's own python.
PYTHON_ID := $(shell $(PYTHON) scripts/check_python.py --id 2>/dev/null)
venv_id = $(or $(shell cat $(1)/.installed-stamp 2>/dev/null),$(shell $(1)/bin/python scripts/check_python.py --id 2>/dev/null))
VENV_ID := $(call venv_id,$(VENV))
TOOLS_VENV_ID := $(call venv_id,$(TOOLS_VENV))
ifneq ($(VENV_ID),$(PYTHON_ID))
$(STAMP): venv-python-changed
endif
ifneq ($(TOOLS_VENV_ID),$(PYTHON_ID))
$(TOOLS_STAMP): venv-python-changed
endif
.PHONY: venv-python-changed
venv-python-changed:

# $(1): the venv, $(2): the id it was made with. The interpreter is checked against
# requires-python (pyproject.toml) before anything is created.
define fresh_venv
	@$(PYTHON) scripts/check_python.py --name '$(PYTHON)'
	@if [ -e $(1) ] && [ '$(2)' != '$(PYTHON_ID)' ]; then \
		echo "$(1) was made by another interpreter ($(or $(2),unknown)): rebuilding it with $(PYTHON_ID)"; \
		rm -rf $(1); fi
	$(PYTHON) -m venv $(1)
endef

# --no-deps: each lock is complete by construction (uv resolved it), so pip installs exactly
# what it pins and `pip check` proves it consistent. Resolving again is not only redundant:
# the pip that `python -m venv` bundles with Python 3.11 (23.2) looks a pinned package's
# extras up on the index (readability-lxml's lxml[html-clean]), finds a release newer than
# the pin, and refuses it in --require-hashes mode, so a new lxml on PyPI broke every install.
$(STAMP): pyproject.toml requirements/lock.txt
	$(call fresh_venv,$(VENV),$(VENV_ID))
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements/lock.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@$(BIN)/python -m pip check || { echo "the lock does not satisfy pyproject.toml: run 'make lock'" >&2; exit 1; }
	echo '$(PYTHON_ID)' > $(STAMP)

install: $(STAMP)

$(TOOLS_STAMP): requirements/tools.txt
	$(call fresh_venv,$(TOOLS_VENV),$(TOOLS_VENV_ID))
	$(TOOLS_BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements/tools.txt
	@$(TOOLS_BIN)/python -m pip check
	echo '$(PYTHON_ID)' > $(TOOLS_STAMP)

tools: $(TOOLS_STAMP)

demo: $(STAMP)
	@$(BIN)/python scripts/demo.py --db $(DEMO_DB)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The contributor's loop (about 3 minutes on 2 cores): the suite without the real model and
# without the slow suites (`pytest --fast`, tests/conftest.py says what it leaves out).
# `make test` is the full suite, and what CI runs.
test-fast: $(STAMP)
	$(BIN)/python -m pytest --fast $(PYTEST_ARGS)

# Branch coverage over the package, including the `serve` subprocesses that inherit the
# environment (coverage's subprocess patch, configured in pyproject.toml).
# It is `make test` (the README's test command) with coverage switched on, except for the
# hardening suite, which CI runs next without coverage (`make test-hardening`): its generated
# inputs, probes and fault loops took 11 of 22 minutes under coverage's tracer, and they are
# there for what they assert (must-be-zero leaks, bounded answers), not for lines reached.
# Together the two are exactly `make test`.
coverage: $(STAMP)
	$(MAKE) --no-print-directory test PYTEST_ARGS="-p no:cacheprovider --durations=25 --ignore=tests/hardening \
		--cov=governed_evidence --cov-branch --cov-report=term-missing:skip-covered --cov-fail-under=$(COVERAGE_MIN)"

test-hardening: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider --durations=10 tests/hardening

LINT_PATHS := governed_evidence tests scripts benchmarks

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

# Fixes first, then formatting: a fix can leave lines the formatter would rewrap.
format: $(STAMP)
	$(BIN)/ruff check --fix $(LINT_PATHS)
	$(BIN)/ruff format $(LINT_PATHS)

typecheck: $(STAMP)
	$(BIN)/mypy

# The evaluation gate: builds a fresh index of the sample corpus, runs the labelled slices
# in evals/questions.jsonl (governance slices through MCP over stdio) and fails when a
# threshold in evals/gate.toml is missed; then the tuning suite over the real corpora in
# ../shared (evals/suites.toml, bounds in evals/gate-tuning.toml; about 2.5 minutes, most of
# it embedding 1,900 passages; a corpus absent on this machine is skipped and said so).
eval-gate: $(STAMP)
	$(GE) eval
	$(GE) eval --suite tuning

# Known vulnerabilities in every locked dependency set. Uses the workspace's offline
# advisory database when present, else pip-audit's online service. --strict: a package
# that cannot be audited fails the step.
audit: $(TOOLS_STAMP)
	@set -e; for lock in $(AUDITED_LOCKS); do \
		echo "pip-audit $$lock"; \
		if [ -x $(OSV_LOCAL) ]; then \
			$(OSV_LOCAL) --pip-audit $(TOOLS_BIN)/pip-audit -- -r $$lock --disable-pip --strict --progress-spinner off; \
		else \
			$(TOOLS_BIN)/pip-audit -r $$lock --disable-pip --strict --progress-spinner off; \
		fi; \
	done

# BEIR SciFact (docs/evaluation.md): nDCG@10 and recall@100 for keyword, semantic and hybrid.
# The first run embeds 5,183 abstracts (about 15 minutes on 2 cores); later runs reuse them.
SCIFACT ?= ../shared/data/beir-scifact
bench-scifact: $(STAMP)
	@mkdir -p .cache
	$(GE) eval beir --dataset $(SCIFACT) --db .cache/beir-scifact.sqlite

# Performance (docs/performance.md, docs/performance.json): search latency at 10k, 100k and 1M
# passages, ingestion, start-up and peak memory. Uses .cache/beir-scifact.sqlite for real
# vectors when present (make bench-scifact), else synthetic unit vectors (stated in the output).
# The first run builds the generated indexes (about 10 minutes for 1M, 3.5 GB under .cache/bench);
# later runs reuse them. About 30 minutes in all on 2 cores.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run --sizes 10000,100000,1000000

# The 10k size only (well under 3 minutes); the last line is one JSON object. With the peers'
# venv present (`make bench-peers` makes it) the project is then timed interleaved with tantivy
# and bm25s, and the line gives its p95 ratio to the faster; without it the ratio is null, said why.
bench-quick: $(STAMP)
	@$(BIN)/python -m benchmarks.run --quick

# The project's hybrid search against the peers a user would pick instead (tantivy or bm25s glued
# to numpy by plain RRF; LanceDB's hybrid query, exact and IVF_HNSW_SQ), interleaved in one process
# over the same passages and vectors: writes docs/peers.json and the peers section of
# docs/performance.md. The peers live in their own venv (.cache/peers-venv: the runtime lock, then
# benchmarks/peers-requirements.txt), never in the product's dependencies. Not part of `make ci`.
# PEERS_SIZES=10000,100000 adds 100k (the generated index is built when absent, about 30 s).
# Real vectors need .cache/beir-scifact.sqlite (`make bench-scifact`); else synthetic, and said so.
PEERS_VENV  := .cache/peers-venv
PEERS_STAMP := $(PEERS_VENV)/.installed-stamp
PEERS_SIZES ?= 10000
PEERS_VENV_ID := $(call venv_id,$(PEERS_VENV))
ifneq ($(PEERS_VENV_ID),$(PYTHON_ID))
$(PEERS_STAMP): venv-python-changed
endif

# --no-deps for the runtime lock: it is complete by construction (scripts/wheel_check.py says why);
# the peers' own dependencies then resolve on top of it.
$(PEERS_STAMP): requirements/runtime.txt benchmarks/peers-requirements.txt
	$(call fresh_venv,$(PEERS_VENV),$(PEERS_VENV_ID))
	$(PEERS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
		-r requirements/runtime.txt
	$(PEERS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r benchmarks/peers-requirements.txt
	echo '$(PYTHON_ID)' > $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)
	PYTHONPATH=$(CURDIR) OPENBLAS_NUM_THREADS=1 $(PEERS_VENV)/bin/python -m benchmarks.peers \
		--sizes $(PEERS_SIZES) --out docs/peers.json --doc docs/performance.md

# The team server over real HTTP: 16 callers of mixed clearance at once, p50/p95 of their
# searches and reads (the sample corpus with the real model; about 40 s). One JSON object.
bench-http: $(STAMP)
	@$(BIN)/python -m benchmarks.http_callers

publication-guard:
	$(PYTHON) scripts/publication_guard.py

# The headless browser the report's rendering test drives (tests/evaluation/test_report_render.py):
# Debian's chromium, installed when absent and this is root with apt-get (CI's machine). Elsewhere
# the test skips and says why; in CI (CI set) an absent browser fails the step instead.
browser:
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "chromium is absent and cannot be installed here (needs root and apt-get): the report's rendering test will skip" >&2; \
		[ -z "$$CI" ] || exit 1; fi

# The wheel on its own, as `pip install .` / `pipx install .` / `uv tool install .` get it:
# built, checked for the tokenizer and the model dependency, installed from runtime.txt into
# a fresh venv, then `governed-evidence ingest` and `search` on a tiny corpus (about 45 s).
wheel-check: $(STAMP)
	$(BIN)/python scripts/wheel_check.py

# Build the image and smoke-test it over stdio, read-only, without network, then in team mode
# (streamable HTTP with a bearer token, read-only, published on 127.0.0.1; the token is issued
# by .venv's CLI); then remove the untagged images the build left (the builder stage; the
# previous image once the tag moved).
container:
	$(PYTHON) scripts/container_smoke.py --build --image governed-evidence:ci

# Regenerate the hashed locks from pyproject.toml (after adding or changing a dependency).
# `make lock UPGRADE=1` also moves unpinned transitive dependencies to their newest release.
lock: $(TOOLS_STAMP)
	$(UV) pip compile $(LOCK_FLAGS) $(LOCK_EXTRAS) $(DEV_EXTRAS) pyproject.toml requirements/build.in -o requirements/lock.txt
	$(UV) pip compile $(LOCK_FLAGS) $(LOCK_EXTRAS) pyproject.toml -c requirements/lock.txt $(RUNTIME_OVERRIDES) -o requirements/runtime.txt
	$(UV) pip compile $(LOCK_FLAGS) requirements/build.in -c requirements/lock.txt -o requirements/build.txt

lock-tools: $(TOOLS_STAMP)
	$(UV) pip compile $(LOCK_FLAGS) requirements/tools.in -o requirements/tools.txt

# Fails when pyproject.toml changed without `make lock`: re-resolves into a scratch copy
# (uv keeps the versions already locked) and compares package pins and hashes.
lock-check: $(TOOLS_STAMP)
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	mkdir -p "$$tmp/requirements"; cp requirements/*.txt requirements/*.in "$$tmp/requirements/"; \
	$(UV) pip compile $(LOCK_FLAGS) $(LOCK_EXTRAS) $(DEV_EXTRAS) pyproject.toml requirements/build.in -o "$$tmp/requirements/lock.txt"; \
	$(UV) pip compile $(LOCK_FLAGS) $(LOCK_EXTRAS) pyproject.toml -c "$$tmp/requirements/lock.txt" $(RUNTIME_OVERRIDES) \
		-o "$$tmp/requirements/runtime.txt"; \
	$(UV) pip compile $(LOCK_FLAGS) requirements/build.in -c "$$tmp/requirements/lock.txt" -o "$$tmp/requirements/build.txt"; \
	for f in lock runtime build; do \
		if ! diff <(grep -v '^ *#' requirements/$$f.txt) <(grep -v '^ *#' "$$tmp/requirements/$$f.txt") >/dev/null; then \
			echo "requirements/$$f.txt is out of date with pyproject.toml: run 'make lock'" >&2; exit 1; \
		fi; \
	done; echo "locks match pyproject.toml"

# The release gate. Steps run in order and stop at the first failure; each reports its time.
ci: $(STAMP) $(TOOLS_STAMP)
	@set -e; total=$$(date +%s); for step in $(CI_STEPS); do \
		start=$$(date +%s); echo; echo "==> make $$step"; \
		$(MAKE) --no-print-directory $$step || { echo "==> FAILED: make $$step" >&2; exit 1; }; \
		echo "==> ok: $$step ($$(( $$(date +%s) - start )) s)"; \
	done; \
	logs=$$(mktemp -d); trap 'rm -rf "$$logs"' EXIT; echo; echo "==> side by side: $(CI_LANES)"; \
	for lane in $(CI_LANES); do \
		( for step in $$(echo "$$lane" | tr ',' ' '); do \
			start=$$(date +%s); \
			if $(MAKE) --no-print-directory $$step > "$$logs/$$step.log" 2>&1; then result=ok; else result=FAILED; fi; \
			echo "$$result $$(( $$(date +%s) - start ))" > "$$logs/$$step.result"; \
			echo "==> $$result: $$step ($$(( $$(date +%s) - start )) s; its log follows when every lane is done)"; \
			[ "$$result" = ok ] || break; \
		done ) & \
	done; wait; failed=0; \
	for step in $$(echo "$(CI_LANES)" | tr ',' ' '); do \
		echo; echo "==> make $$step"; \
		if [ ! -f "$$logs/$$step.result" ]; then echo "==> not run: $$step (an earlier step of its lane failed)" >&2; failed=1; continue; fi; \
		cat "$$logs/$$step.log"; read result seconds < "$$logs/$$step.result"; \
		if [ "$$result" = ok ]; then echo "==> ok: $$step ($$seconds s)"; \
		else echo "==> FAILED: make $$step" >&2; failed=1; fi; \
	done; [ $$failed = 0 ] || exit 1; \
	echo; echo "==> make ci passed in $$(( $$(date +%s) - total )) s"

clean:
	rm -rf $(VENV) $(TOOLS_VENV) $(DEMO_DB) .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.*
