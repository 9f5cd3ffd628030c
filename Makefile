# Two commands do all set-up on a fresh machine with Python 3.11, Java 17 and Maven:
#   make demo   - venv + package and its test harness (harness/), fetch Kafka from Maven Central, run the main job on a
#                 local broker
#   make test   - the whole test suite against real local brokers
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CONSTRAINTS := constraints/python3.11.txt
# Kafka jars, broker work dirs and the demo's Airflow home live here (git-ignored).
export KIP848_CACHE_DIR ?= $(CURDIR)/.cache
export PYTHONDONTWRITEBYTECODE := 1


# The Kafka releases `make test-matrix` runs the migration paths on (tests/matrix_tests.txt); `make test` runs on the
# default (DEFAULT_KAFKA_VERSION, 4.4.0). Each release's jars are fetched from Maven Central on its first run.
KAFKA_MATRIX ?= 4.2.2 4.3.1 4.4.0

.PHONY: demo test test-fast test-matrix check system-deps k8s-control-plane venv kafka-fetch kafka-start kafka-stop lock clean

$(STAMP): pyproject.toml harness/pyproject.toml $(CONSTRAINTS)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null || \
	  { echo "error: '$(PYTHON)' is not Python 3.11: install Python 3.11 or run make PYTHON=/path/to/python3.11" >&2; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[dev,spark,spark-submit,ssh,kubernetes]' -e ./harness
	@touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m kip848_harness.demo --dags-folder dags

# Static checks first (lint + import order, types), then every test.
check: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m mypy --strict -p airflow_provider_kip848.kafka -p airflow_provider_kip848.fleet -p airflow_provider_kip848.changecontrol

# Debian packages of the deploy tier (PostgreSQL, Redis, Chromium), installed when missing.
system-deps:
	scripts/system-deps.sh

# The Kubernetes control plane of the Kubernetes controller's tests (kube-apiserver, kube-controller-manager, etcd),
# built from their Go modules once and cached outside the checkout (~/.cache/kip848/k8s, KIP848_K8S_CACHE): about
# 8 minutes of two cores the first time on a machine, nothing after (the script prints which).
k8s-control-plane:
	scripts/k8s-control-plane.sh

# Parallel workers (pytest-xdist): each worker a session of its own (broker, Airflow home); a work unit is a file, the
# deploy tier or the Spark files, started in a set order (tests/conftest.py). PYTEST_WORKERS=0 runs in one process.
# Three on 2 cores: the run waits on brokers, sessions and schedulers about a quarter of its time, which a third
# worker fills (docs/development.md, "Test run time": 2,040 s with two, 1,774 and 1,959 s in two runs with three, on
# one machine; 1,733 s at 4a0544e). Two copies of the suite side by side (six workers) both pass, in about 57 minutes.
PYTEST_WORKERS ?= 3
# Before the suite: each DAG file's parse time as the dag-processor parses it (bench/dag_parse.py; a figure, not a
# check: tests/unit/test_dag_parse.py asserts what a parse may load).
test: check system-deps k8s-control-plane
	$(PY) bench/dag_parse.py --rounds 2
	$(PY) -m pytest -v -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)

# A developer's quick answer (not CI's): static checks, unit tests and the single-broker integration tests of under
# 10 s (no end-to-end DAG runs, no 3-node cluster, no Spark, no deployment, none of tests/long_tests.txt).
test-fast: check
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder \
	  -m "not slow and not cluster and not spark and not long" $(PYTEST_ARGS)

# Conveniences (not part of the two-command set-up).
kafka-fetch: $(STAMP)
	$(PY) -m kip848_harness kafka fetch
kafka-start: $(STAMP)
	$(PY) -m kip848_harness kafka start
kafka-stop: $(STAMP)
	$(PY) -m kip848_harness kafka stop

# Re-pin the exact versions the suite runs on (after changing a range in pyproject.toml).
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv && .lock-venv/bin/pip install --quiet '.[dev,spark,spark-submit,ssh,kubernetes]' ./harness apache-airflow-providers-celery psycopg2-binary asyncpg
	.lock-venv/bin/pip freeze --exclude airflow-provider-kip848 --exclude kip848-harness | grep -v '^-e' > $(CONSTRAINTS)
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info harness/build harness/*.egg-info

# The migration paths on every supported release, one release after another (each its own session: its brokers,
# its jars); the wall time of each is printed. Not part of `make test` (which runs everything on the default).
test-matrix: $(STAMP)
	@for v in $(KAFKA_MATRIX); do \
	  start=$$(date +%s); \
	  KIP848_KAFKA_VERSION=$$v $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder \
	    $$(grep -v '^#' tests/matrix_tests.txt) $(PYTEST_ARGS) || { echo "test-matrix: Kafka $$v failed"; exit 1; }; \
	  echo "test-matrix: Kafka $$v passed in $$(( $$(date +%s) - start )) s"; \
	done
