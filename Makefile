# The two commands of the README:  make run  and  make test.  Each installs what it needs:
# `run` the service and its runtime dependencies only; `test` also the dev dependency group, the
# local-llm extra and the Node tools the tests drive (package.json: Node.js >= 22.19 with npm).
# Needs Python 3.12, gcc and make; uv is installed from PyPI into .tools/ and never fetches Python.

PYTHON ?= $(shell for p in python3.12 $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	"$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo "$$p"; break; }; done)
UV_VERSION := 0.13.9
UV := .tools/bin/uv
export UV_PYTHON_DOWNLOADS := never

.PHONY: run test install lint typecheck unit conformance bench

run: .venv/.synced-run
	.venv/bin/agentic-rag serve $(ARGS)

test: install lint typecheck unit conformance

# Everything for development: the dev group and the Node tools.
install: .venv/.synced-dev node_modules/.installed

# Node tools the tests drive (the MCP Inspector CLI), pinned by package-lock.json.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

$(UV):
	@test -n "$(PYTHON)" || { echo "Python 3.12 not found: install it, or pass PYTHON=/path/to/python3.12"; exit 1; }
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# What running needs. --inexact keeps the dev group of an earlier `make test` installed.
.venv/.synced-run: $(UV) uv.lock pyproject.toml
	$(UV) sync --frozen --no-dev --inexact --python $(PYTHON)
	@touch $@

# The tests run the local LLM too (the local-llm extra: llama.cpp is built from source once,
# several minutes, then cached by uv).
.venv/.synced-dev: $(UV) uv.lock pyproject.toml
	$(UV) sync --frozen --extra local-llm --python $(PYTHON)
	@touch $@

lint:
	.venv/bin/ruff check src tests conformance bench scripts
	.venv/bin/ruff format --check src tests conformance bench scripts
	.venv/bin/lint-imports

typecheck:
	.venv/bin/mypy src

unit:
	.venv/bin/python -m pytest tests

conformance:
	.venv/bin/python -m pytest conformance

bench: .venv/.synced-dev
	.venv/bin/python bench/run.py
