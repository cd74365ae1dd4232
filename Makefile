# The two commands of the README:  make run  and  make test.  Both install what they need.
# Needs Python 3.12, gcc and make; uv is installed from PyPI into .tools/ and never fetches Python.

PYTHON ?= $(shell for p in python3.12 $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	"$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo "$$p"; break; }; done)
UV_VERSION := 0.13.9
UV := .tools/bin/uv
export UV_PYTHON_DOWNLOADS := never
export GRAPHITI_TELEMETRY_ENABLED := false

.PHONY: run test install lint typecheck unit conformance bench

run: install
	.venv/bin/agentic-rag serve $(ARGS)

test: install lint typecheck unit conformance

install: .venv/.synced node_modules/.installed

# Node tools the tests drive (the MCP Inspector CLI), pinned by package-lock.json.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

$(UV):
	@test -n "$(PYTHON)" || { echo "Python 3.12 not found: install it, or pass PYTHON=/path/to/python3.12"; exit 1; }
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

.venv/.synced: $(UV) uv.lock pyproject.toml
	$(UV) sync --frozen --python $(PYTHON)
	@touch $@

lint:
	.venv/bin/ruff check src tests conformance bench scripts
	.venv/bin/ruff format --check src tests conformance bench scripts

typecheck:
	.venv/bin/mypy src

unit:
	.venv/bin/python -m pytest tests

conformance:
	.venv/bin/python -m pytest conformance

bench: install
	.venv/bin/python bench/run.py
