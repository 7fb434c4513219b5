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

.PHONY: all assets build generate check-generate test vet demo chaos clean

all: build

## assets: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
## kubectl and kwok from Go modules into $(ASSETS) (idempotent).
assets:
	@bash tools/build.sh

## build: the loom CLI, into bin/loom.
build:
	$(GO) build -o bin/loom ./cmd/loom

# A module with no packages yet (bench/ before its first benchmark) is skipped.
has_pkgs = [ -n "$$(cd $(1) && $(GO) list ./... 2>/dev/null)" ]

vet:
	@set -e; for m in $(MODULES); do if $(call has_pkgs,$$m); then echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...); fi; done

## generate: rerun controller-gen over the example operators (deep-copy
## methods, CRD manifests, RBAC roles).
generate: assets
	@bash tools/generate.sh

## check-generate: fail when the generated files in the tree are out of date.
check-generate: assets
	@bash tools/generate.sh --check

## test: vet, the generated-files check, then race-enabled tests in every
## module (tools/ has no tests).
test: assets vet check-generate
	@set -e; for m in . bench examples/custom-apiserver; do if $(call has_pkgs,$$m); then echo "go test -race ($$m)"; (cd $$m && $(GO) test -race -count=1 ./...); fi; done

## demo: the At operator on a local cluster (examples/at/demo.sh): brings up
## `loom dev` (controllers, scheduler, one fake node), runs the operator in
## its own process (it installs the At CRD and its webhooks), creates an At
## due five seconds later and prints its phases live until DONE, shows
## `loom get ats` (converted by the operator's webhook), then stops the
## operator and the cluster.
demo: assets build
	@$(GO) build -o bin/at-example ./examples/at
	@bash examples/at/demo.sh bin

## chaos: the informer chaos trials at length (200 trials instead of the 20 of make test).
chaos: assets
	LOOM_CHAOS_TRIALS=200 $(GO) test -race -count=1 -timeout 60m -run TestInformersSurviveChaos -v ./cache

clean:
	rm -rf bin
