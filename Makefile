# Gatehouse: `make run` runs the product on a fresh machine, `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/gatehouse
CHROMIUM_PATH ?= /usr/bin/chromium

.PHONY: install browsers run test lint typecheck migrations pytest clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

# Runs on the embedded SQLite file unless DATABASE_URL is set. The secret key is generated once
# into the git-ignored .local/ folder unless SECRET_KEY or SECRET_KEY_FILE is given (settings find it
# there too, for manage.py on a loopback development setup). `set -e`: any step that fails stops the
# run; before, a `;` after the `&&` chain let Daphne start after a failed migrate. preflight says in
# one line what is wrong with the port or the database before anything else runs.
run: install
	@mkdir -p .local
	@test -s .local/secret_key || $(PY) -c "import secrets; print(secrets.token_urlsafe(50))" > .local/secret_key
	@set -e; \
	if [ -z "$$SECRET_KEY" ] && [ -z "$$SECRET_KEY_FILE" ]; then export SECRET_KEY_FILE=.local/secret_key; fi; \
	export PORT=$(PORT); \
	$(PY) manage.py preflight; \
	$(PY) manage.py migrate --noinput -v0; \
	$(PY) manage.py collectstatic --noinput -v0; \
	$(PY) manage.py bootstrap_demo; \
	public=$${PUBLIC_URL:-http://127.0.0.1:$(PORT)}; \
	echo ""; \
	echo "Gatehouse is starting."; \
	echo "  MCP endpoint:  $$public/mcp"; \
	echo "  Sign in as:    alice (acme admin), bob (acme viewer) or carol (globex admin)"; \
	echo "                 with DEMO_PASSWORD, or the password printed above"; \
	echo "  Admin:         $$public/admin/ (create an operator with: $(PY) manage.py createsuperuser)"; \
	echo ""; \
	exec $(VENV)/bin/daphne -v 0 -b 127.0.0.1 -p $(PORT) config.asgi:application

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: install
	SECRET_KEY=typecheck-only $(VENV)/bin/mypy .

# The browser tests (tests/e2e/browser) drive Debian's chromium through Playwright; Playwright's own
# browser download is never used. Installed here when missing (root, or sudo), else a loud failure.
browsers:
	@if [ ! -x "$(CHROMIUM_PATH)" ]; then \
	  echo "Installing Debian's chromium for the browser tests (apt-get)"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium fonts-dejavu-core >/dev/null; \
	fi || true
	@test -x "$(CHROMIUM_PATH)" || { echo "Chromium is missing at $(CHROMIUM_PATH); install Debian's chromium or set CHROMIUM_PATH." >&2; exit 1; }

# A model change without its migration fails here, before any test runs.
# Models against migrations only; the database need not exist (a fresh machine has only what pytest
# creates), so Django's warning that it could not read the applied history is beside the point here.
migrations: install
	SECRET_KEY=test-only-secret DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} \
	$(PY) -W ignore::RuntimeWarning manage.py makemigrations --check --dry-run

pytest: install browsers
	SECRET_KEY=test-only-secret DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CHROMIUM_PATH=$(CHROMIUM_PATH) \
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test: lint typecheck migrations pytest

clean:
	rm -rf $(VENV) .local .pytest_cache .mypy_cache .ruff_cache .ci/artifacts
