# The set-up commands of the README: `make run`, `make test` and `make docs`.
# Both create .venv on first use (torch==2.13.0 CPU from the local wheel) and are cheap to repeat.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
EXTRAS ?= dev,data,ray,peft,tensorboard,docs,code

.PHONY: run test lint docs clean

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
	$(VENV)/bin/python -m pytest tests -q $(PYTEST_ARGS)

# The documentation site into site/, strict: a broken link, a missing page or a docstring warning fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
