# The two set-up commands of the README: `make run` and `make test`.
# Both create .venv on first use (torch==2.13.0 CPU from the local wheel) and are cheap to repeat.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
EXTRAS ?= dev,data,ray,peft,tensorboard

.PHONY: run test lint clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[$(EXTRAS)]'
	$(VENV)/bin/python -c "import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith('2.13.0') else 'wrong torch ' + v)"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/rlvr run $(ARGS)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest tests $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
