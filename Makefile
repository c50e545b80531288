# fedbound: `make demo`, `make test`, `make bench` each work on a fresh machine in one command.
# They create .venv when it is missing and install into it: torch==2.13.0 first (the CPU build that lies
# on this machine's disk; an unpinned torch would pull a multi-GB CUDA build), then the project with its
# `train`, `dev` and `explorer` extras.  Re-installs only when pyproject.toml changes.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
FEDBOUND := $(VENV)/bin/fedbound
STAMP := $(VENV)/.fedbound-installed
DEMO_OUT ?= out/demo

.PHONY: install test demo bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[train,dev,explorer]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check .

# The front door: each capability that lands adds its step here (a few minutes in all on 2 CPU cores).
demo: $(STAMP)
	@mkdir -p $(DEMO_OUT)
	@echo "== 1. Accounting: noise for eps = 6, delta = 0.01 over 25 rounds at q = 0.4, by every method"
	$(FEDBOUND) calibrate --eps 6 --delta 0.01 --q 0.4 --steps 25
	@echo "== 2. The registered papers, then two plans: the recommendation (T, K, sigma under exact accounting,"
	@echo "==    its bound), then the paper's own answer. NbAFL: eps = 6, 50 clients; UDP: eps_i = 8, q = 0.6"
	$(FEDBOUND) papers
	$(FEDBOUND) plan nbafl examples/nbafl_mnist.toml
	$(FEDBOUND) plan nbafl examples/nbafl_mnist.toml --set K=20 --json > $(DEMO_OUT)/nbafl_plan.json
	$(FEDBOUND) plan udp examples/udp_mnist.toml
	@echo "== 2b. PADPFL: which impact factors, rounds, mu and noise (scenario 3 of the paper)"
	$(FEDBOUND) plan adaptive examples/adaptive_s3_plan.toml
	@echo "== 2b'. DP-PFL: T*, the inner and outer noise under Theorem 1's RDP accounting, C* and the bound"
	$(FEDBOUND) plan dppfl examples/dppfl_mnist.toml
	@echo "== 2c. WPFL: sigma_DP under proven accounting beside Theorem 1's, and one round of the min-max schedule"
	$(FEDBOUND) plan wpfl examples/wpfl_mnist.toml
	$(FEDBOUND) schedule wpfl examples/wpfl_mnist.toml --rounds 1
	@echo "== 3. NbAFL bound vs T and vs K (PNG + SVG in $(DEMO_OUT))"
	$(FEDBOUND) plot nbafl examples/nbafl_mnist.toml --vs T --out $(DEMO_OUT)/nbafl_vs_T.png
	$(FEDBOUND) plot nbafl examples/nbafl_mnist.toml --vs K --set T=60 --out $(DEMO_OUT)/nbafl_vs_K.png
	@echo "== 4. The paper's claims, checked: holds / fails in a region, with counterexamples"
	$(FEDBOUND) claims nbafl
	@echo "== 5. The simulator: train NbAFL and UDP+CRD on the embedded MNIST subset"
	$(FEDBOUND) train nbafl examples/nbafl_mnist.toml --out $(DEMO_OUT)/train_nbafl --no-progress --overwrite
	$(FEDBOUND) train udp examples/udp_crd_mnist.toml --out $(DEMO_OUT)/train_udp_crd --no-progress --overwrite
	@echo "== 6. The other three papers on the engine: adaptive DP with priority aggregation (PADPFL),"
	@echo "==    RDP personalised meta-learning (DP-PFL), wireless personalised FL with quantized DP (WPFL)"
	$(FEDBOUND) train adaptive examples/adaptive_mnist.toml --out $(DEMO_OUT)/train_adaptive --no-progress --overwrite
	$(FEDBOUND) train dppfl examples/dppfl_mnist.toml --out $(DEMO_OUT)/train_dppfl --no-progress --overwrite
	$(FEDBOUND) train wpfl examples/wpfl_mnist.toml --out $(DEMO_OUT)/train_wpfl --no-progress --overwrite
	@echo "== 7. The design explorer: fedbound serve [--open] starts a local page over every paper (docs/explorer.png)."
	@echo "==    Here it starts on a free port and its API answers one live update for NbAFL: the plan (exactly the"
	@echo "==    JSON of fedbound plan --json) and the bound against T"
	@$(FEDBOUND) serve --port 0 > $(DEMO_OUT)/serve.log 2>&1 & pid=$$!; \
	for i in $$(seq 100); do grep -q http $(DEMO_OUT)/serve.log && break; sleep 0.1; done; head -1 $(DEMO_OUT)/serve.log; \
	$(PY) -m fedbound.explorer.probe "$$(grep -o 'http://[0-9.:]*/' $(DEMO_OUT)/serve.log | head -1)" nbafl; \
	status=$$?; kill $$pid; exit $$status
	@echo "== 8. Privacy audit (1,000 trials per side through the engine, logistic regression): NbAFL as the paper"
	@echo "==    trains it (10 weak-prox local steps) moves the clipped upload past 2C/m and the audit says LEAK;"
	@echo "==    with sensitivity = provable (per-sample clipping C_g) it is consistent. Figures + JSON in $(DEMO_OUT)"
	$(FEDBOUND) audit nbafl examples/audit_nbafl.toml --trials 1000 --set nbafl.sensitivity='"paper"' --set train.local_steps=10 --set nbafl.eps=2.0 --no-control --out $(DEMO_OUT)/audit_nbafl_paper.png
	$(FEDBOUND) audit nbafl examples/audit_nbafl.toml --trials 1000 --out $(DEMO_OUT)/audit_nbafl_provable.png
	@echo "==    Client level (--level client: every record of the client replaced): UDP, read at the client-level"
	@echo "==    sensitivity 2 eta C, is consistent and its halved-noise control is detected"
	$(FEDBOUND) audit udp examples/audit_udp_client.toml --level client --out $(DEMO_OUT)/audit_udp_client.png

bench: $(STAMP)
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info out
