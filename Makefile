# CHF Testbed. `make run` runs the testbed locally; `make test` is what CI runs.
# Every tool a target needs is installed by the target itself (pinned
# versions, from the Go module proxy or Debian packages).

SHELL := /bin/bash
GO ?= go
export GOFLAGS := -buildvcs=false
BIN := $(CURDIR)/bin
TOOLS := $(CURDIR)/.tools
export PATH := $(TOOLS)/bin:$(PATH)

HELM_VERSION := v3.22.0
MSGP_VERSION := v1.6.5
BENCHSTAT_VERSION := v0.0.0-20251023143056-3684bd442cc8

# Debian packages some tests and measurements drive as independent peers.
DEB_PKGS := nghttp2-client tshark

.PHONY: all build run test test-go fmt-check vet lint bench tools deb-deps generate clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

## run: start a local CHF on the embedded store, drive a load run, print the report.
run: build
	$(BIN)/chf local

## test: what CI runs: gofmt check, go vet, and every test with -race.
test: fmt-check vet tools test-go

test-go:
	$(GO) test -race -timeout 40m ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

lint: fmt-check vet

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## tools: install the pinned tools tests need (helm from the module proxy,
## h2load and tshark from Debian) when they are missing.
tools: $(TOOLS)/bin/helm deb-deps

$(TOOLS)/bin/helm:
	GOBIN=$(TOOLS)/bin $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

deb-deps:
	@missing=""; \
	command -v h2load >/dev/null || missing="$$missing nghttp2-client"; \
	command -v tshark >/dev/null || missing="$$missing tshark"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi

## generate: regenerate the msgp codecs of the internal encoding.
generate:
	$(GO) run github.com/tinylib/msgp@$(MSGP_VERSION) -file chf/charge.go -o chf/charge_gen.go -tests=false

clean:
	rm -rf $(BIN) results
