//go:build tools

// Package codegen pins the code generators Loom runs in `make generate`:
// controller-gen (sigs.k8s.io/controller-tools) writes the examples' CRD
// manifests, RBAC roles and deep-copy methods. It is its own module so that
// its dependency versions do not move the control-plane build in tools/.
package codegen

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
