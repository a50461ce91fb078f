# The playground's two front doors: `make run` and `make test`. See README.md.
SHELL := /bin/bash
PORT ?= 8000
HOST ?= 127.0.0.1
PY ?= python3
VENV := .venv
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.9
export UV_PROJECT_ENVIRONMENT := $(VENV)
export UV_LINK_MODE := copy
# Trust the system's CA store (/etc/ssl/certs), as pip and curl do, not only uv's bundled roots.
export UV_SYSTEM_CERTS := 1

.PHONY: run test install install-test chromium llama bench lint migrate

# A venv with uv in it, then the locked dependencies (runtime only, or with the dev group).
$(VENV)/bin/python:
	@command -v $(PY) >/dev/null || { echo "python3 is missing: apt-get install python3 python3-venv"; exit 1; }
	@$(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { echo "Python 3.11+ is needed"; exit 1; }
	@$(PY) -m venv $(VENV) || { echo "Could not create a virtualenv: on Debian run 'sudo apt-get install python3-venv' and retry."; rm -rf $(VENV); exit 1; }

$(UV): $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"

install: $(UV)
	$(UV) sync --frozen --no-dev --inexact -q

install-test: $(UV)
	$(UV) sync --frozen -q

migrate: install
	$(VENV)/bin/python manage.py migrate --noinput -v 0

# Not a debug run (DJANGO_DEBUG defaults to false): the secret key, encryption key and simulator
# key are generated into var/ (mode 0600) on first start. The largest websocket message is the
# same for daphne and for the page's own check before sending (PLAYGROUND_WS_MAX_MESSAGE_BYTES).
WS_MAX_MESSAGE_BYTES ?= $(or $(PLAYGROUND_WS_MAX_MESSAGE_BYTES),1048576)
run: migrate
	@echo "Serving the playground on http://$(HOST):$(PORT)/ (Ctrl+C stops)"
	PLAYGROUND_WS_MAX_MESSAGE_BYTES=$(WS_MAX_MESSAGE_BYTES) $(VENV)/bin/daphne -b $(HOST) -p $(PORT) \
	  --websocket-max-message-size $(WS_MAX_MESSAGE_BYTES) --websocket-max-frame-size $(WS_MAX_MESSAGE_BYTES) \
	  playground.asgi:application

# Debian's Chromium for the browser tests (never a downloaded browser build).
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  elif command -v sudo >/dev/null; then sudo apt-get update -qq && sudo apt-get install -y -qq chromium; \
	  else echo "Chromium is missing and I cannot install it (need root or sudo): apt-get install chromium"; exit 1; fi; }

# llama.cpp's llama-server built from the llama-cpp-python sdist, plus SmolLM2, a tiny reasoning GGUF
# and a tiny embedding GGUF (cached).
llama: install-test
	bash scripts/build-llama-server.sh
	$(VENV)/bin/python scripts/make_think_gguf.py
	$(VENV)/bin/python scripts/make_embed_gguf.py

test: install-test chromium llama
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: install-test
	$(VENV)/bin/ruff check .

# Every phase (sequential, 100 streams, knee, fan-out, browser), then the README table from
# bench.json; BENCH_ARGS adds or overrides options (python -m bench --help).
bench: install-test chromium
	$(VENV)/bin/python -m bench --browser $(BENCH_ARGS)
	$(VENV)/bin/python -m bench.readme
