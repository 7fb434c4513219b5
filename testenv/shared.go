package testenv

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Shared is one control plane for all the tests of a package: started by
// the first test that asks for it, so that tests which need no server
// start none, and stopped by Main once every test has run.
//
//	var shared = testenv.Shared{Options: testenv.Options{Controllers: true}}
//
//	func TestMain(m *testing.M) { shared.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		env := shared.Env(t)
//		...
//	}
//
// Tests that share a control plane share its objects: give each test its
// own namespace (Env.Namespace) or names.
type Shared struct {
	// Options configure the control plane.
	Options Options

	// AcrossPackages shares one control plane between the packages of a
	// `go test` run (`go test ./...`) whose Shared values have this set
	// and equal Options (CRD paths compared as absolute paths). The first
	// package to ask starts it in a process of its own (a copy of its
	// test binary, whose Main serves the control plane), and the others
	// use it; that process stops it within a second of the go command's
	// exit, or once no test process has used it for ten seconds. The
	// servers of a shared control plane cannot be stopped or restarted
	// from a test (ErrShared). Linux only; elsewhere, and for a package
	// with two Shared values, each package starts its own. Default off.
	AcrossPackages bool

	once sync.Once
	env  *Env
	err  error
}

// Start starts the control plane on first use and returns it, or the
// error that start-up met (the same one on every later call).
func (s *Shared) Start() (*Env, error) {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if s.AcrossPackages && runtime.GOOS == "linux" {
			s.env, s.err = attachShared(ctx, s.Options)
			return
		}
		s.env, s.err = Start(ctx, s.Options)
	})
	return s.env, s.err
}

// Env is Start for a test: it fails the test if the control plane cannot
// start.
func (s *Shared) Env(t testing.TB) *Env {
	t.Helper()
	env, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Main runs the package's tests, prints the tail of every server's log if
// any failed, stops the control plane if one was started, and exits.
func (s *Shared) Main(m *testing.M) {
	if dir := os.Getenv(sharedDirEnv); dir != "" {
		// This process is the one that serves a control plane shared
		// across packages, not a test run.
		os.Exit(serveShared(dir, s.Options))
	}
	code := m.Run()
	if s.env != nil {
		if code != 0 {
			fmt.Fprintln(os.Stderr, s.env.LogTails(30))
		}
		if err := s.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
