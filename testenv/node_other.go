//go:build !linux

package testenv

import "context"

// checkRealNodeHost: real nodes run on Linux only.
func checkRealNodeHost() error {
	return &RealNodesUnavailableError{Missing: []string{"linux"}}
}

func (e *Env) prepareRealNodeNetwork(ctx context.Context) error {
	return checkRealNodeHost()
}

func (e *Env) startRealNodes(ctx context.Context, kubeletBin, kubeProxyBin string) error {
	return checkRealNodeHost()
}

func (e *Env) stopRealNodes() error { return nil }

func sweepStaleRealNodes(log interface{ Warn(string, ...any) }) {}
