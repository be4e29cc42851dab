# CHF Testbed. `make run` runs the testbed locally; `make test` is what CI runs.
# Every tool a target needs is installed by the target itself (pinned
# versions, from the Go module proxy or Debian packages).

SHELL := /bin/bash
GO ?= go
export GOFLAGS := -buildvcs=false
BIN := $(CURDIR)/bin
TOOLS := $(CURDIR)/.tools
export PATH := $(TOOLS)/bin:$(PATH)
# TOOL_CACHE keeps each pinned tool this Makefile builds (helm, h2spec,
# promtool, the Kubernetes binaries) once per machine, keyed by version, as
# Go's build cache keeps packages: a fresh clone copies them into .tools
# instead of linking them again.
TOOL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/chf-testbed
export CHF_TOOL_CACHE := $(TOOL_CACHE)

HELM_VERSION := v3.22.0
H2SPEC_VERSION := v2.2.1+incompatible
MSGP_VERSION := v1.6.5
BENCHSTAT_VERSION := v0.0.0-20251023143056-3684bd442cc8
PROMTOOL_VERSION := v0.316.0

# Debian packages some tests and measurements drive as independent peers.
DEB_PKGS := nghttp2-client tshark iperf3 chromium

.PHONY: all build run soak lab test cluster-test cluster-up cluster-down cluster-e2e node-deps test-go test-alloc fmt-check vet lint bench fuzz tools deb-deps generate clean charts-test images perf-gate perf-gate-selftest bench-creates bench-ratios check-money

all: build

# VERSION is what `chf --version` and `loadgen --version` print (and what
# loadgen reports carry); the Dockerfile takes it as a build argument.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/...

## run: start a local CHF on the embedded store (aslite), drive the default
## scenario with loadgen, print the report and write report files under
## ./results/<timestamp>/. Override with RUN_ARGS, e.g. RUN_ARGS="--rate 3000 --duration 60s".
## The services run the production runtime profile, their default: no
## scheduler workaround is measured as a default. RUN_ARGS="--runtime-profile lab"
## runs the lab one (chassis/README.md, Runtime profile); the report records which ran.
RUN_ARGS ?=
run: build
	$(BIN)/loadgen local $(RUN_ARGS)

## lab: compare the network models on this box (root): build host, baremetal,
## bridge, calico-* and sriov emulations in network namespaces, run the CHF
## on each with and without CPU pinning, write lab.json, lab.md and lab.html
## under ./results/lab-<timestamp>/ (loadgen/lab/README.md). Override with
## LAB_ARGS, e.g. LAB_ARGS="--models baremetal,sriov --trials 5".
## CLUSTER=1 also runs the models on a real cluster of CLUSTER_NODES nodes
## (cluster e2e: containerd, kubelet, real CNI plugins) after the emulated
## ones, each beside its emulation in the report (datapath cni); it needs a
## fixed --rate in LAB_ARGS (default here 1000) and builds the Kubernetes
## binaries once (cluster/README.md).
LAB_ARGS ?=
CLUSTER ?=
CLUSTER_NODES ?= 2
ifeq ($(CLUSTER),1)
lab: build deb-deps node-deps images $(TOOLS)/bin/helm
	@bin=$$(cluster/build.sh --all $(TOOLS)) && \
	$(BIN)/loadgen lab --rate 1000 --cluster --cluster-nodes $(CLUSTER_NODES) --kube-bin $$bin --helm $(TOOLS)/bin/helm --cluster-bin $(BIN)/cluster $(LAB_ARGS)
else
lab: build deb-deps
	$(BIN)/loadgen lab $(LAB_ARGS)
endif

## test: what CI runs: gofmt check, go vet, every test with -race, and the
## allocation tests without it. The report pages are rendered in headless
## Chromium; their screenshots stay in $(TEST_ARTIFACTS)/pages.
TEST_ARTIFACTS ?= $(CURDIR)/results/test-artefacts
export TEST_ARTIFACTS
test: fmt-check vet tools test-go test-alloc cluster-test

## test-go: every package's tests under the race detector, TEST_P test
## binaries at a time. Most tests wait on the processes they start and on
## timers: with go test's default (one binary per CPU) half of two CPUs
## stayed idle (docs/measurements/2026-12-07-make-test-time.md).
TEST_P ?= 6
test-go:
	$(GO) test -p $(TEST_P) -race -timeout 40m ./...

## test-alloc: the zero-allocation tests of the hot paths (Test*Alloc*,
## testing.AllocsPerRun), which skip under -race, run without it: only the
## packages that have one (found by name), so no other test binary starts.
ALLOC_PKGS = $(shell git ls-files '*_test.go' | xargs grep -lE '^func Test[A-Za-z0-9_]*Alloc' | xargs -n1 dirname | sort -u | sed 's|^|./|')
test-alloc:
	$(GO) test -count=1 -timeout 10m -run 'Alloc' $(ALLOC_PKGS)

## cluster-test: the charts, Pod Security, RBAC and Kubernetes discovery on a
## real control plane (etcd, kube-apiserver, kube-controller-manager on
## loopback); TestNode: a node's failed start and SIGINT during `cluster up`,
## nothing left; TestLabCluster: `loadgen lab --cluster` on two real nodes
## (containerd + kubelet + kube-proxy, each in a network namespace): the
## images imported, the chf chart installed with the lab's placement and
## driven by the loadgen Job, bare metal and the routed pod network beside
## their emulations in lab.json, the no-egress guard, tear-down clean, also
## after SIGINT; the overlay (flanneld's VXLAN) and SR-IOV's stand-in
## (Multus's macvlan net1 across the nodes) on two nodes
## (cluster/README.md). The Kubernetes binaries, flanneld and multus are
## built from the Go module proxy once into .tools/kube-<version>/
## (minutes on a cold cache).
cluster-test: $(TOOLS)/bin/helm node-deps images
	@bin=$$(cluster/build.sh --controlplane --node --flannel --multus $(TOOLS)) && \
	CHF_CONTROLPLANE_BIN=$$bin CHF_KUBE_BIN=$$bin CHF_IMAGES=$(IMAGE_OUT) HELM=$(TOOLS)/bin/helm \
	  $(GO) test -count=1 -timeout 30m -v -run 'TestControlPlane|TestNode|TestLabCluster' ./cluster/

## node-deps: the Debian packages a node needs: containerd, runc, the CNI
## plugins (bridge, host-local, macvlan), iptables, conntrack.
node-deps:
	$(call apt_install,containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins iptables:iptables conntrack:conntrack)

## cluster-up / cluster-down: a real single-node cluster on this machine
## (root): the control plane on the host, a node in its own network
## namespace with the images of `make images` imported, no route off the
## machine. KUBECONFIG=$(CLUSTER_DIR)/pki/admin.kubeconfig afterwards.
## CLUSTER_ARGS adds flags (e.g. --cpu-manager static --multus).
## cluster-down removes everything it made, also after a crash.
CLUSTER_DIR ?= $(CURDIR)/.cluster
CLUSTER_ARGS ?=
cluster-up: build node-deps images
	@bin=$$(cluster/build.sh --all $(TOOLS)) && \
	$(BIN)/cluster up --dir $(CLUSTER_DIR) --bin $$bin $(CLUSTER_ARGS)

cluster-down:
	$(GO) run ./cmd/cluster down --dir $(CLUSTER_DIR)

## cluster-e2e: from nothing to a report per network model and a comparison
## table under results/cluster-<time>/ (cluster-e2e.md), then tear-down:
## up (static CPU manager and Multus when a model needs them), each model's
## chart installed and driven by the loadgen Job, 3 interleaved trials.
## E2E_ARGS overrides, e.g. E2E_ARGS="--models pod-network,baremetal --rate 500".
E2E_ARGS ?= --trials 3 --rate 500 --duration 20
cluster-e2e: build node-deps images $(TOOLS)/bin/helm
	@bin=$$(cluster/build.sh --all $(TOOLS)) && \
	$(BIN)/cluster e2e --dir $(CLUSTER_DIR) --bin $$bin --helm $(TOOLS)/bin/helm $(E2E_ARGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

lint: fmt-check vet

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-creates: h2load posting Nchf creates to `chf local`: creates/s and
## each process's CPU per create (local/bench-creates.sh explains the
## arguments), e.g. CREATES_ARGS="session 320 100" PARALLEL=16 INFLIGHT=4.
CREATES_ARGS ?= sms 8 8000
bench-creates: build deb-deps
	local/bench-creates.sh $(CREATES_ARGS)

## bench-ratios: `loadgen bench`, issue 52's ratios in one session: the relay
## floor and the CHF at 1,000 TPS alternated for 3 rounds, a sweep (SLO p99 <=
## 10 ms, no errors, late <= 1%), a run at twice the knee and h2load at the same
## rate when h2load is installed (make deb-deps); prints the ratios with their
## verdicts, writes bench.json and bench.md
## under ./results/bench-<timestamp>/ (loadgen/docs/bench.md). 10-20 minutes with the defaults;
## override with BENCH_ARGS, e.g. BENCH_ARGS="--rounds 5 --runtime-profile lab".
BENCH_ARGS ?=
bench-ratios: build
	$(BIN)/loadgen bench --chf $(BIN)/chf $(BENCH_ARGS)

## tools: install the pinned tools tests need (helm and h2spec from the module
## proxy, h2load, tshark, iperf3 and chromium, which renders the report pages
## in loadgen/report/pagetest, from Debian) when they are missing; promtool
## checks the services' /metrics.
tools: $(TOOLS)/bin/helm $(TOOLS)/bin/h2spec $(TOOLS)/bin/promtool deb-deps

# go_tool NAME VERSION PACKAGE: go install PACKAGE@VERSION into
# $(TOOL_CACHE)/NAME-VERSION once per machine, then copy it into .tools/bin.
define go_tool
	@mkdir -p $(TOOLS)/bin
	@c='$(TOOL_CACHE)/$(1)-$(2)'; \
	if [ ! -x "$$c/$(1)" ]; then \
	  GOBIN="$$c" scripts/progress.sh "installing $(1) $(2) (once per machine)" $(GO) install $(3)@$(2) || exit 1; \
	fi; \
	cp "$$c/$(1)" $@.tmp && mv $@.tmp $@
endef

$(TOOLS)/bin/helm:
	$(call go_tool,helm,$(HELM_VERSION),helm.sh/helm/v3/cmd/helm)

# h2spec: the HTTP/2 conformance suite cgw's TestH2spec runs (strict).
$(TOOLS)/bin/h2spec:
	$(call go_tool,h2spec,$(H2SPEC_VERSION),github.com/summerwind/h2spec/cmd/h2spec)

# promtool: `promtool check metrics` lints every service's /metrics in the
# tests (chassis/telemetry/telemetrytest).
$(TOOLS)/bin/promtool:
	$(call go_tool,promtool,$(PROMTOOL_VERSION),github.com/prometheus/prometheus/cmd/promtool)

# apt_install: install the Debian packages whose command (or, for a path,
# file) is missing; each item is <command or /path>:<package>.
define apt_install
	@missing=""; \
	for c in $(1); do \
	  w=$${c%%:*}; p=$${c##*:}; \
	  case $$w in /*) [ -e $$w ] ;; *) command -v $$w >/dev/null ;; esac || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deb-deps:
	$(call apt_install,h2load:nghttp2-client tshark:tshark iperf3:iperf3 chromium:chromium)

## generate: regenerate the msgp codecs of the internal encoding.
generate:
	cd chf && $(GO) generate ./...

## perf-gate: build chf at REF (a git ref) and at the working tree, then gate
## the working tree against REF on this machine: GATE_ARGS pairs of trials,
## a baseline and a candidate trial back to back (order alternating), each on
## a fresh local CHF; about 6 minutes with the defaults. Exit 0 pass,
## 4 regression, 5 unmeasurable (loadgen/README.md, "The gate"). Both chf
## binaries and loadgen are built into a temporary directory, so a bin/
## rebuilt meanwhile does not change a running gate. PERF_LOCK=FILE runs the
## trials (not the builds) under `flock FILE`.
REF ?= HEAD
GATE_ARGS ?= --trials 12 --rate 1000 --duration 8s --warmup 2s --ramp-up 1s --accounts 20000
PERF_LOCK ?=
# perf_gate_run(candidate build flags, env, verdict check): build chf at REF
# into $$tmp/chf-base, loadgen and the candidate chf into $$tmp, run the gate.
define perf_gate_run
	@set -e; tmp=$$(mktemp -d); trap 'git worktree remove --force '"$$tmp"'/src >/dev/null 2>&1; rm -rf '"$$tmp" EXIT; \
	git worktree add --detach $$tmp/src $(REF) >/dev/null; \
	echo "perf-gate: building chf at $(REF) (baseline) and $(2) (candidate)"; \
	(cd $$tmp/src && $(GO) build -o $$tmp/chf-base ./cmd/chf); \
	$(1); \
	$(GO) build -o $$tmp/loadgen ./cmd/loadgen; \
	start=$$(date +%s); \
	rc=0; $(3) $(if $(PERF_LOCK),flock $(PERF_LOCK)) $$tmp/loadgen gate --baseline-chf $$tmp/chf-base --candidate-chf $$tmp/chf-cand $(GATE_ARGS) || rc=$$?; \
	echo "perf-gate: $$(( $$(date +%s) - start )) s, exit $$rc"; \
	$(4)
endef
perf-gate:
	$(call perf_gate_run,$(GO) build -o $$tmp/chf-cand ./cmd/chf,the working tree,,exit $$rc)

## perf-gate-selftest: check that the gate catches a deliberate slowdown:
## chf at REF against the same source built with -tags perfgate_slowdown
## (cmd/chf/slowdown_perfgate.go: the OCP spins SLOWDOWN of extra CPU on
## top of its own; 50% measured +18% SUT CPU per transaction at 1000 TPS).
## Succeeds only when the gate reports a regression (exit 4).
SLOWDOWN ?= 50%
perf-gate-selftest:
	$(call perf_gate_run,test -f $$tmp/src/cmd/chf/slowdown_perfgate.go || cp cmd/chf/slowdown_perfgate.go $$tmp/src/cmd/chf/; \
	  (cd $$tmp/src && $(GO) build -tags perfgate_slowdown -o $$tmp/chf-cand ./cmd/chf),$(REF) + $(SLOWDOWN) extra OCP CPU,PERFGATE_SLOWDOWN=$(SLOWDOWN),\
	  if [ $$rc -eq 4 ]; then echo "perf-gate-selftest: the slowdown was caught"; else echo "perf-gate-selftest: the slowdown was NOT caught (exit $$rc, want 4)"; exit 1; fi)

## fuzz: a short run of every network-facing decoder's fuzz target and of
## the checked arithmetic (chf/checked) against math/big.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzConn -fuzztime $(FUZZTIME) ./abm/aslite
	$(GO) test -run '^$$' -fuzz FuzzMessage -fuzztime $(FUZZTIME) ./abm/aslite
	$(GO) test -run '^$$' -fuzz FuzzServeConn -fuzztime $(FUZZTIME) ./chassis/h2c
	$(GO) test -run '^$$' -fuzz FuzzClientConn -fuzztime $(FUZZTIME) ./chassis/h2c
	$(GO) test -run '^$$' -fuzz FuzzDecodeCCR -fuzztime $(FUZZTIME) ./cgw/diameter
	$(GO) test -run '^$$' -fuzz FuzzPeer -fuzztime $(FUZZTIME) ./cgw/diameter
	$(GO) test -run '^$$' -fuzz FuzzDecodeCCA -fuzztime $(FUZZTIME) ./loadgen/gy
	$(GO) test -run '^$$' -fuzz 'FuzzNchfDecode$$' -fuzztime $(FUZZTIME) ./chf
	$(GO) test -run '^$$' -fuzz FuzzNchfDecodeMatchesReference -fuzztime $(FUZZTIME) ./chf
	$(GO) test -run '^$$' -fuzz FuzzHpackDecoderMatchesXNet -fuzztime $(FUZZTIME) ./chassis/h2c
	$(GO) test -run '^$$' -fuzz FuzzDecodeSessions -fuzztime $(FUZZTIME) ./abm
	$(GO) test -run '^$$' -fuzz FuzzChargeBatch -fuzztime $(FUZZTIME) ./chassis/rpc
	$(GO) test -run '^$$' -fuzz FuzzApplyBatch -fuzztime $(FUZZTIME) ./chassis/rpc
	$(GO) test -run '^$$' -fuzz FuzzBatchReply -fuzztime $(FUZZTIME) ./chassis/rpc
	$(GO) test -run '^$$' -fuzz FuzzAdd -fuzztime $(FUZZTIME) ./chf/checked
	$(GO) test -run '^$$' -fuzz FuzzMul -fuzztime $(FUZZTIME) ./chf/checked

## soak: a long run (not in CI) at about 70% of the knee: RSS, open files,
## goroutines per service and the p99 sampled every 10 s into soak.json and
## soak.txt in the results directory, which say flat or where it grows.
## SOAK_RATE defaults to 70% of the ~10,000 TPS knee measured on the 2-core
## development box; set it from your own sweep.
SOAK_DURATION ?= 30m
SOAK_RATE ?= 7000
soak: build
	$(BIN)/loadgen local --duration $(SOAK_DURATION) --rate $(SOAK_RATE) --sample-every 10s --progress off $(SOAK_ARGS)

## check-money: the model-based money checker's long run (not in CI): random,
## seeded operations against local services under kill -9 and SIGSTOP of every
## service, every balance checked against an independent model
## (loadgen/moneycheck/README.md). A mismatch prints the seed, the history and a
## shrunk reproduction, and fails. Override with CHECK_ARGS, e.g.
## CHECK_ARGS="--duration 1h --seed 42" or "--avoid open" to keep the defects
## still open out of the mix.
CHECK_ARGS ?= --duration 10m
check-money: build
	$(BIN)/loadgen check-money --chf $(BIN)/chf $(CHECK_ARGS)

## charts-test: helm lint, template and strict decoding of every chart and values file.
charts-test: $(TOOLS)/bin/helm
	$(GO) test -race -count=1 ./charts/...

## images: build the container images as archives, with no container engine,
## daemon or registry (cluster/image/README.md): the static binaries into
## $(IMAGE_BIN), then $(IMAGE_OUT)/chf.tar (chf and aslite), loadgen.tar and
## pause.tar (the node's sandbox image), tagged $(IMAGE_REPO)/<name>:$(IMAGE_TAG).
## Import one into containerd with `ctr -n k8s.io images import $(IMAGE_OUT)/chf.tar`.
## With Docker, build the Dockerfile's targets instead (docker build --target chf .).
IMAGE_REPO ?= chf-testbed
IMAGE_TAG ?= $(shell sed -n 's/^appVersion: *"\(.*\)"/\1/p' charts/chf/Chart.yaml)
IMAGE_BIN ?= $(BIN)/static
IMAGE_OUT ?= $(BIN)/images
images:
	$(GO) run ./cmd/cluster images --build --src . --bin-dir $(IMAGE_BIN) \
	  --out $(IMAGE_OUT) --repo $(IMAGE_REPO) --tag=$(IMAGE_TAG)

clean:
	rm -rf $(BIN) results
