# Two entry points for a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN_DIR ?= runs/demo

.PHONY: install demo test lint clean

# torch goes in first, pinned: on CPU machines the pinned release resolves to the CPU build
# (an unpinned torch would pull a multi-GB CUDA build). fasttext (needed by deepfocus) builds
# from source with the compiler; pybind11 comes from its build requirements.
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# The main job on the embedded demo corpus: a tiny backbone, then the English pivot's and
# Uzbek's modules (recipes/add-language.yaml defaults), in a zoo inside the run folder.
demo: install
	rm -rf $(RUN_DIR)
	$(BIN)/modsenc train-backbone --output $(RUN_DIR)
	$(BIN)/modsenc add-language en --backbone $(RUN_DIR)/backbone --zoo $(RUN_DIR)/zoo --work-dir $(RUN_DIR)/work/en
	$(BIN)/modsenc add-language uz --zoo $(RUN_DIR)/zoo --work-dir $(RUN_DIR)/work/uz

test: install
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q tests

lint: install
	$(BIN)/ruff check modsenc tests bench

clean:
	rm -rf $(VENV) runs
