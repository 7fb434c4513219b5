# Loom's two set-up commands:
#   make demo   brings up a local control plane and shows it working
#   make test   runs every module's vet and race-enabled tests against real servers
# Both build the control-plane binaries first when they are missing (make assets).

SHELL := bash
GO ?= go

include testenv/versions.env
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)
ASSETS := $(or $(LOOM_ASSETS),$(CACHE)/loom/kube-$(KUBE_VERSION)_etcd-$(ETCD_VERSION)_kwok-$(KWOK_VERSION)/bin)
KUBECTL := $(ASSETS)/kubectl

# Every Go module in the repository; the core first.
MODULES := . bench tools examples/custom-apiserver tools/helmcheck

.PHONY: all assets build generate check-generate api-check test vet fuzz ha-webhooks demo chaos bench-recovery bench-sharding release release-e2e node-deps real-nodes clean

all: build

## assets: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
## kubectl and kwok from Go modules into $(ASSETS) (idempotent).
assets:
	@bash tools/build.sh

## build: the loom CLI, into bin/loom.
build:
	$(GO) build -o bin/loom ./cmd/loom

vet:
	@bash tools/each-module.sh "$(MODULES)" $(GO) vet ./...

## generate: rerun controller-gen over the example operators (deep-copy
## methods, CRD manifests, RBAC roles).
generate: assets
	@bash tools/generate.sh

## check-generate: fail when the generated files in the tree are out of date.
check-generate: assets
	@bash tools/generate.sh --check

## api-check: compare the core module's exported API with the last
## release's (tools/apicompat/baseline); an incompatible change fails unless
## CHANGELOG.md's Unreleased section names it (pkg.Obj, pkg.Type.Member).
api-check:
	cd tools && $(GO) test -count=1 ./apicompat && $(GO) run ./apicompat

# The modules with tests, each with its go test -timeout (tools/ is
# tested by api-check).
TEST_MODULES := .:30m bench:20m examples/custom-apiserver:10m tools/helmcheck:10m

## test: vet, the generated-files check, then race-enabled tests in every
## module. A module that fails to load fails the run (tools/each-module.sh,
## checked by tools/each-module_test.sh).
test: assets node-deps vet check-generate api-check
	@bash tools/each-module_test.sh
	@# bench/metrics reads kubebuilder's Grafana dashboards from the module cache.
	@cd bench && $(GO) mod download sigs.k8s.io/kubebuilder/v4@v4.16.0
	@bash tools/each-module.sh "$(TEST_MODULES)" $(GO) test -race -count=1 ./...

## fuzz: run every fuzz target of the core module (tools/fuzz.sh), one at a
## time, for FUZZTIME each (default 2m: over 30 minutes in all) with
## FUZZPARALLEL workers (default 2); prints the executions each reached.
## A crasher stays in its package's testdata/fuzz/ as a regression input,
## and fails the run once every target has run. make test replays the
## corpora.
FUZZTIME ?= 2m
FUZZPARALLEL ?= 2
fuzz:
	@FUZZTIME=$(FUZZTIME) FUZZPARALLEL=$(FUZZPARALLEL) GO=$(GO) bash tools/fuzz.sh

## ha-webhooks: the At operator's webhooks on three replicas (OS processes
## behind a round-robin proxy), each restarted in turn and one CA rotation
## forced during 3,000 creates and conversions; no call may fail
## (examples/at TestWebhooksOnThreeReplicas; make test runs 300).
ha-webhooks: assets
	cd examples/at && LOOM_HA_CREATES=3000 $(GO) test -race -count=1 -v -run '^TestWebhooksOnThreeReplicas$$' -timeout 30m .

## demo: the At operator on a local cluster (examples/at/demo.sh): brings up
## `loom dev` (controllers, scheduler, one fake node), runs the operator in
## its own process (it installs the At CRD and its webhooks), creates an At
## due five seconds later and prints its phases live until DONE, shows
## `loom get ats` (converted by the operator's webhook), then stops the
## operator and the cluster.
demo: assets build
	@$(GO) build -o bin/at-example ./examples/at
	@bash examples/at/demo.sh bin

## bench-recovery: Loom's informer against client-go's through API-server
## and network faults, side by side (bench/recovery); the raw lines are
## appended to bench/recovery/results/$(date).txt.
bench-recovery: assets
	cd bench && $(GO) run ./recovery -out recovery/results/$$(date +%F).txt

## bench-sharding: the full sharding scenario (bench/sharding): 5,000
## Shelves owning 2 ConfigMaps each, replicas as OS processes through
## 1 -> 3 -> 5 -> 2 -> kill -9, with 2,000 probe creates per webhook mode
## after 1 -> 3 (about 15 minutes), then the webhooks alone on a quiet
## control plane with 0 and 5,000 Shelves (about 10 minutes more); the
## reports are appended to bench/sharding/results/$(date).txt. make test
## runs a reduced form of each.
bench-sharding: assets
	cd bench && $(GO) build -o sharding/sharding ./sharding && \
	out=sharding/results/$$(date +%F).txt && \
	./sharding/sharding -cpu -probes 2000 -out $$out && \
	./sharding/sharding -quiet-webhook -shelves 0 -probes 2000 -out $$out && \
	./sharding/sharding -quiet-webhook -shelves 5000 -probes 2000 -out $$out; \
	rc=$$?; rm -f sharding/sharding; exit $$rc

## chaos: the informer chaos trials at length (200 trials instead of the 20 of make test).
chaos: assets
	LOOM_CHAOS_TRIALS=200 $(GO) test -race -count=1 -timeout 60m -run TestInformersSurviveChaos -v ./cache

## node-deps: install what real nodes need (containerd, runc, the CNI
## plugins, iptables, nftables, conntrack) with apt-get when missing
## (tools/node-deps.sh). Without them the real-node tests skip and say why;
## with CI=true a failed install fails the run, so they cannot silently
## stop running.
node-deps:
	@bash tools/node-deps.sh

## real-nodes: the real-node tests (kubelet, containerd, runc and
## kube-proxy running Pods; make test runs them too), the At operator
## deployed as two Pods (examples/at TestOperatorAsPods: webhooks through
## its Service, leader Pod deleted, a rolling update under webhook load;
## about a minute and a half), then real against fake node figures,
## appended to testenv/results/$(date)-real-nodes.txt (docs/dev-cluster.md).
real-nodes: assets node-deps
	$(GO) test -count=1 -v -run '^(TestRealNode|TestNodeConfigs|TestCRIMessages)' -timeout 20m ./testenv
	cd cmd/loom && $(GO) test -count=1 -v -run '^TestDevRealNodeLogs$$' -timeout 20m .
	cd examples/at && LOOM_OPERATOR_PODS=1 $(GO) test -count=1 -v -run '^TestOperatorAsPods$$' -timeout 20m .
	LOOM_NODE_FIGURES=$(CURDIR)/testenv/results/$$(date +%F)-real-nodes.txt $(GO) test -count=1 -v -run '^TestNodeFigures$$' -timeout 20m ./testenv

## release: the release VERSION (such as v0.1.0) as a Go module proxy in
## RELEASE_DIR (default dist/proxy): the core module, tools and
## tools/codegen, zipped from the committed tree (tools/release). CHANGELOG.md
## must have a section for VERSION. Before tagging, record the release's API
## (cd tools && go run ./apicompat -write -version VERSION) and commit it.
## Use it with GOPROXY=file://$(RELEASE_DIR),https://proxy.golang.org
## GONOSUMDB=github.com/loom-k8s/loom.
RELEASE_DIR ?= dist/proxy
release:
	@[ -n "$(VERSION)" ] || { echo "release: set VERSION, such as make release VERSION=v0.1.0" >&2; exit 1; }
	@[ -f tools/apicompat/baseline/$(VERSION).gcexport ] || echo "release: warning: no API baseline for $(VERSION) (cd tools && go run ./apicompat -write -version $(VERSION))" >&2
	cd tools && $(GO) run ./release -root .. -version $(VERSION) -out $(abspath $(RELEASE_DIR))

## release-e2e: docs/getting-started.md as a user outside this repository
## runs it, from a release of this tree at v0.1.0 (cmd/loom
## TestGettingStarted with LOOM_RELEASE_VERSION): go install loom@v0.1.0
## from a file module proxy, empty HOME, GOPATH, module and build caches;
## the control-plane binaries from the per-user cache. make test runs the
## same page from a release at a version of its own, with warm caches.
release-e2e: assets
	cd cmd/loom && LOOM_RELEASE_VERSION=v0.1.0 LOOM_COLD_GOCACHE=1 $(GO) test -count=1 -v -run '^TestGettingStarted$$' -timeout 60m .

clean:
	rm -rf bin dist
