package testenv

import (
	"context"
	"fmt"
	"os"
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
// own namespace or names.
type Shared struct {
	// Options configure the control plane.
	Options Options

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
