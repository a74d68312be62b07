# gatefold — build, test and run. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# gatefold needs Go 1.27 (Gateway API v1.7.0). The go command fetches this
# toolchain through the module proxy on first use; a machine's own Go, and a
# toolchain line in go.mod, are not enough where GOTOOLCHAIN=local is set.
export GOTOOLCHAIN := go1.27.3
VERSION ?= $(shell git describe --tags --always --dirty --abbrev=12 2>/dev/null || echo dev)
# The image is named once, in config/manager/kustomization.yaml (images:);
# IMG defaults to that name and tag, and make deploy sets it through kustomize.
IMG ?= $(shell awk '$$1 == "newName:" {n = $$2} $$1 == "newTag:" {t = $$2} END {print n ":" t}' config/manager/kustomization.yaml)
CONTROLLER_GEN := $(GO) tool controller-gen
STATICCHECK := $(GO) tool staticcheck

# The real control plane (kube-apiserver, kube-controller-manager, etcd,
# kubectl) is built from Go modules by test/controlplane. The build is cached
# outside the clone, keyed by everything that decides its output, so a fresh
# clone on the same machine reuses it; bin/controlplane links to it. It and
# Traefik build with the machine's own Go (GOTOOLCHAIN=local), which their
# modules need no newer than.
KUBE_VERSION := v1.37.2
CP_LDFLAGS := -s -w \
	$(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=37 \
	-X $(p).gitTreeState=clean -X $(p).buildDate=1970-01-01T00:00:00Z)
CP_KEY := $(shell (cat test/controlplane/go.mod test/controlplane/go.sum test/controlplane/etcd/main.go; \
	echo '$(CP_LDFLAGS)'; GOTOOLCHAIN=local $(GO) version) | sha256sum | cut -c1-16)
CP_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gatefold/controlplane/$(CP_KEY)
CP_BINARIES := kube-apiserver kube-controller-manager etcd kubectl

# Tests and `make dev` find the control plane here; never a stray one from the
# environment, which could be another version.
export KUBEBUILDER_ASSETS := $(CURDIR)/bin/controlplane

# Traefik, the Gateway implementation the data-plane tests (and make dev) run,
# is built from its Go module by test/traefik, cached the same way; bin/traefik
# links to it.
TRAEFIK_VERSION := v3.6.12
TRAEFIK_LDFLAGS := -s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$(TRAEFIK_VERSION) \
	-X github.com/traefik/traefik/v3/pkg/version.BuildDate=1970-01-01T00:00:00Z
TRAEFIK_KEY := $(shell (cat test/traefik/go.mod test/traefik/go.sum; \
	echo '$(TRAEFIK_LDFLAGS)'; GOTOOLCHAIN=local $(GO) version) | sha256sum | cut -c1-16)
TRAEFIK_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gatefold/traefik/$(TRAEFIK_KEY)

# Tests find Traefik here; without it (a plain go test) they skip its test.
export GATEFOLD_TRAEFIK := $(CURDIR)/bin/traefik/traefik

##@ Develop

.PHONY: help
help: ## Show the targets
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)

.PHONY: dev
dev: controlplane traefik build ## Run gatefold on a local real control plane until Ctrl-C
	bin/gatefold dev

.PHONY: test
test: controlplane traefik verify-generated ## Run every test (unit, fuzz seeds, integration on the real control plane)
	$(GO) test -count=1 -timeout 30m ./...

# Every fuzz target in the module, found by its func line, fuzzed in turn:
# go test -fuzz takes one target per package run. A failing input is kept
# under the package's testdata/fuzz, where make test then runs it as a seed.
FUZZTIME ?= 10s
FUZZ_TARGETS = git grep --untracked -o -E '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed -E 's|^(.*)/[^/]*:func (Fuzz.*)$$|./\1 \2|; s|^[^/]*:func (Fuzz.*)$$|. \1|'

.PHONY: fuzz
fuzz: ## Fuzz each fuzz target for FUZZTIME (10s)
	@targets=$$($(FUZZ_TARGETS)); \
	[ -n "$$targets" ] || { echo "No fuzz targets found" >&2; exit 1; }; \
	while read -r pkg target; do \
		echo "Fuzzing $$target in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg" </dev/null; \
	done <<<"$$targets"

# Gateway API's own ListenerSet conformance tests, unmodified, against
# bin/gatefold as installed (test/conformance: a Go module of its own, which
# make vet and make lint do not reach, so it is vetted here): once with the
# stub implementation, once with Traefik carrying the traffic in a network
# namespace of the test's own.
.PHONY: conformance
conformance: controlplane traefik build ## Run Gateway API's ListenerSet conformance tests against bin/gatefold (stub, then Traefik) and write docs/conformance
	@mkdir -p bin/conformance && touch bin/conformance/started
	cd test/conformance && $(GO) vet ./... && \
		GATEFOLD_BINARY=$(CURDIR)/bin/gatefold $(GO) test -count=1 -timeout 20m ./...
	@for f in docs/conformance/gatefold-listenerset-results.md docs/conformance/traefik-listenerset-results.md; do \
		if [ $$f -nt bin/conformance/started ]; then cat $$f; \
		else echo "SKIPPED: this run did not write $$f (go test -v says why; GATEFOLD_REQUIRE_TRAEFIK=1 fails instead): its table is an earlier run's"; fi; \
	done

# The randomized soak (test/soak): gatefold as installed, three replicas,
# random operations and faults, checked against an oracle of its own. make
# test runs it for 60s; SEED replays a run's schedule.
DURATION ?= 10m
SEED ?=
REPLICAS ?= 3

.PHONY: soak
soak: controlplane build ## Run the soak with faults for DURATION (10m), SEED, REPLICAS (3); report in bin/soak/report.md
	@mkdir -p bin/soak
	GATEFOLD_SOAK_DURATION=$(DURATION) GATEFOLD_SOAK_SEED=$(SEED) GATEFOLD_SOAK_REPLICAS=$(REPLICAS) \
		GATEFOLD_SOAK_REPORT=$(CURDIR)/bin/soak/report.md GATEFOLD_BINARY=$(CURDIR)/bin/gatefold \
		$(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' ./test/soak

# BENCH_FLAGS go to the harness, e.g. BENCH_FLAGS='--only scale'. A run with
# --only writes into bin/bench unless --out says otherwise, so the published
# tables in docs stay whole.
BENCH_FLAGS ?=

.PHONY: bench
bench: controlplane traefik build ## Run the benchmarks on the real control plane (about 30 minutes), write docs/benchmarks.{json,md}; fail on a row not correct
	$(GO) run ./test/bench $(BENCH_FLAGS)

.PHONY: bench-quick
bench-quick: controlplane traefik build ## Run a reduced benchmark (under two minutes) into bin/bench, CI's smoke test; fail on a row not correct
	$(GO) run ./test/bench --quick --out bin/bench $(BENCH_FLAGS)

# SCALE is how many fragments bench-scale creates, all on one pool.
SCALE ?= 50000

.PHONY: bench-scale
bench-scale: controlplane build ## Run the scale and steady phases on one pool of SCALE (50000) fragments into bin/bench-scale; fail on a row not correct
	$(GO) run ./test/bench --only scale,steady --scale-fragments $(SCALE) --scale-pool --out bin/bench-scale $(BENCH_FLAGS)

##@ Build

# The binary's link flags, make build's and the image's alike; both stamp
# main.version with VERSION and main.commit with GATEFOLD_REVISION (hack/image
# adds those two itself). Outside a git checkout, set GATEFOLD_REVISION.
GATEFOLD_LDFLAGS = -s -w
GATEFOLD_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)

.PHONY: build
build: ## Build bin/gatefold
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(GATEFOLD_LDFLAGS) -X main.version=$(VERSION) -X main.commit=$(GATEFOLD_REVISION)' \
		-o bin/gatefold ./cmd/gatefold

.PHONY: controlplane
controlplane: ## Build kube-apiserver, kube-controller-manager, etcd and kubectl v1.37.2 from Go modules (cached)
	@if $(foreach b,$(CP_BINARIES),[ -x "$(CP_CACHE)/$(b)" ] &&) true; then :; else \
		echo "Building the control plane $(KUBE_VERSION) into $(CP_CACHE) (a cold build takes several minutes)"; \
		rm -rf "$(CP_CACHE).tmp"; \
		(cd test/controlplane && GOTOOLCHAIN=local $(GO) build -trimpath -ldflags '$(CP_LDFLAGS)' -o "$(CP_CACHE).tmp/" \
			k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl ./etcd); \
		rm -rf "$(CP_CACHE)"; mv "$(CP_CACHE).tmp" "$(CP_CACHE)"; \
	fi
	@mkdir -p bin && ln -sfn "$(CP_CACHE)" bin/controlplane
	@echo "Control plane $(KUBE_VERSION) ready in bin/controlplane"

.PHONY: traefik
traefik: ## Build Traefik v3.6.12 from its Go module (cached), the Gateway implementation of the data-plane tests
	@if [ -x "$(TRAEFIK_CACHE)/traefik" ]; then :; else \
		echo "Building Traefik $(TRAEFIK_VERSION) into $(TRAEFIK_CACHE) (a cold build takes several minutes)"; \
		rm -rf "$(TRAEFIK_CACHE).tmp"; \
		(cd test/traefik && GOTOOLCHAIN=local $(GO) build -trimpath -ldflags '$(TRAEFIK_LDFLAGS)' -o "$(TRAEFIK_CACHE).tmp/" \
			github.com/traefik/traefik/v3/cmd/traefik); \
		rm -rf "$(TRAEFIK_CACHE)"; mv "$(TRAEFIK_CACHE).tmp" "$(TRAEFIK_CACHE)"; \
	fi
	@mkdir -p bin && ln -sfn "$(TRAEFIK_CACHE)" bin/traefik
	@echo "Traefik $(TRAEFIK_VERSION) ready in bin/traefik"

# hack/image: gatefold alone in one layer per platform, run as 65532, in one
# OCI image index; the same tree, Go toolchain and tags give the same digest,
# whatever GOFLAGS, GOAMD64, GOARM64, GOEXPERIMENT or GOFIPS140 say.
IMAGE_BUILD = $(GO) run ./hack/image build --out bin/image --image '$(IMG)' --version '$(VERSION)' \
	--revision '$(GATEFOLD_REVISION)' --ldflags '$(GATEFOLD_LDFLAGS)'

.PHONY: image
image: ## Build gatefold's image for linux/amd64 and linux/arm64 into bin/image (an OCI layout naming it IMG; no Docker engine)
	$(IMAGE_BUILD)
	@echo "IMG $(IMG): make push IMG=<registry>/<repository>/gatefold:<tag> pushes it, make deploy IMG=... installs it"

.PHONY: image-archive
image-archive: image ## Write bin/image.tar, bin/image as an OCI archive, for a local cluster: kind load image-archive bin/image.tar
	$(GO) run ./hack/image archive --layout bin/image --out bin/image.tar

.PHONY: push
push: ## Build bin/image and push it to IMG, which names its registry (checked first), with your own registry credentials
	$(IMAGE_BUILD) --push
	$(GO) run ./hack/image push --layout bin/image --image '$(IMG)'

.PHONY: docker-build
docker-build: ## Build the container image IMG (needs a Docker engine)
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(GATEFOLD_REVISION) -t $(IMG) .

##@ Deploy

KUBECTL ?= bin/controlplane/kubectl
OVERLAY ?= default
DEPLOY_DIR ?= bin/deploy

# A throwaway overlay of config/$(OVERLAY) that sets the image to $(IMG), as
# `kustomize edit set image` would: kubectl applies it, no kustomize binary.
.PHONY: deploy-overlay
deploy-overlay: ## Write bin/deploy: config/OVERLAY (default, ha, self-signed) with the image IMG
	@case '$(OVERLAY)' in default|ha|self-signed) ;; *) echo "OVERLAY must be default, ha or self-signed, not '$(OVERLAY)'" >&2; exit 1;; esac
	@mkdir -p '$(DEPLOY_DIR)'
	@img='$(IMG)'; tag=; digest=; \
	case "$$img" in *@*) digest=$${img#*@}; img=$${img%%@*};; esac; \
	case "$${img##*/}" in *:*) tag=$${img##*:}; img=$${img%:*};; esac; \
	{ echo '# Generated by make deploy-overlay: config/$(OVERLAY) with image $(IMG).'; \
	  echo 'apiVersion: kustomize.config.k8s.io/v1beta1'; \
	  echo 'kind: Kustomization'; \
	  echo 'resources:'; \
	  echo "- $$(realpath -m --relative-to='$(DEPLOY_DIR)' 'config/$(OVERLAY)')"; \
	  echo 'images:'; \
	  echo '- name: gatefold'; \
	  echo "  newName: \"$$img\""; \
	  if [ -n "$$tag" ]; then echo "  newTag: \"$$tag\""; fi; \
	  if [ -n "$$digest" ]; then echo "  digest: \"$$digest\""; fi; \
	} > '$(DEPLOY_DIR)/kustomization.yaml'

.PHONY: deploy
deploy: deploy-overlay ## Install config/OVERLAY with the image IMG into the current kubeconfig context (KUBECTL)
	$(KUBECTL) apply --server-side -k '$(DEPLOY_DIR)'

# kubectl delete waits until gatefold's namespace, and with it its pods, is
# gone; only then are the objects gatefold made outside it removed, or a
# running replica would make them again.
.PHONY: undeploy
undeploy: deploy-overlay ## Remove what make deploy installed, then what gatefold made (see docs/operations.md, Uninstall)
	$(KUBECTL) delete --ignore-not-found -k '$(DEPLOY_DIR)'
	KUBECTL='$(KUBECTL)' bash config/uninstall-leftovers.sh

##@ Generate and check

.PHONY: generate
# The API's apply configurations build on gateway-api's for the types it embeds.
GW_AC := sigs.k8s.io/gateway-api/applyconfiguration/apis/v1
AC_EXTERNAL := {sigs.k8s.io/gateway-api/apis/v1.ParentGatewayReference@$(GW_AC),sigs.k8s.io/gateway-api/apis/v1.ListenerEntry@$(GW_AC)}

generate: ## Generate the deepcopy code and the apply configurations
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) 'applyconfiguration:externalApplyConfigurations=$(AC_EXTERNAL)' paths=./api/v1alpha1

.PHONY: manifests
manifests: ## Generate the CRDs (standard channel fields only), RBAC and webhook configurations from markers, and the chart's parts from them
	$(CONTROLLER_GEN) crd rbac:roleName=manager-role webhook paths="./api/...;./webhook/...;./merger/...;./routing/..." \
		output:crd:artifacts:config=config/crd/bases \
		output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	$(GO) run ./hack/crdchannel config/crd/bases/*.yaml
	$(CONTROLLER_GEN) rbac:roleName=self-signed-role paths=./certs/... output:rbac:artifacts:config=config/rbac/self-signed
	$(GO) run ./hack/chart generate

GENERATED_SUM = find api config -type f \( -name 'zz_generated.*' -o -path 'api/*/applyconfiguration/*' -o -path 'config/crd/bases/*' \
	-o -path config/rbac/role.yaml -o -path config/webhook/manifests.yaml \) | sort | xargs sha256sum; \
	find charts/gatefold -type f \( -path 'charts/gatefold/crds/*' -o -name _generated.tpl -o -name clusterroles.yaml -o -name Chart.yaml \) | sort | xargs sha256sum

.PHONY: verify-generated
verify-generated: ## Fail when generated files are stale
	@before=$$($(GENERATED_SUM)); \
	$(MAKE) -s generate manifests; \
	if [ "$$before" != "$$($(GENERATED_SUM))" ]; then \
		echo "Generated files were stale and have been regenerated: review and commit them"; \
		git status --short -- api config charts; exit 1; \
	fi

.PHONY: fmt
fmt: ## Format the Go code
	$(GO) fmt ./...

.PHONY: vet
vet: ## Vet the Go code
	$(GO) vet ./...

.PHONY: lint
lint: vet ## Check formatting, run staticcheck, check go.mod files are tidy and helm lint (strict) charts/gatefold
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "Not gofmt-ed (run make fmt):"; echo "$$unformatted"; exit 1; fi
	$(STATICCHECK) ./...
	@# test/conformance is a module of its own that builds on test/testenv:
	@# its go.mod must follow what testenv imports.
	@for dir in . test/conformance; do \
		(cd $$dir && $(GO) mod tidy -diff >/dev/null) || { echo "$$dir/go.mod is not tidy: run go mod tidy there" >&2; exit 1; }; \
	done
	$(GO) run ./hack/chart lint
	@deps=$$($(GO) list -deps ./cmd/gatefold); \
	if grep -E '^github.com/gatefold/gatefold/(test|hack)/' <<<"$$deps"; then echo "The gatefold binary links the test or hack packages above" >&2; exit 1; fi; \
	for dir in $$(sed -n 's|^github.com/gatefold/gatefold/\([^/]*\)/.*|\1|p; s|^github.com/gatefold/gatefold/\([^/]*\)$$|\1|p' <<<"$$deps" | sort -u); do \
		grep -q "^COPY $$dir/ " Dockerfile || { echo "The Dockerfile does not copy $$dir/, which the gatefold binary links" >&2; exit 1; }; \
	done

.PHONY: clean
clean: ## Remove build outputs (the cached control plane stays)
	rm -rf bin
