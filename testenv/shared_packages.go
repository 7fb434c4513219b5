package testenv

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A control plane shared across packages (Shared.AcrossPackages) runs in
// a process of its own, the daemon: a copy of the test binary of the
// first package that asked, started with sharedDirEnv set, whose
// Shared.Main serves the control plane instead of running tests. The
// packages of one `go test` run find it through a folder named after the
// go command's process and the Options:
//
//	lock        flock'ed while a process decides to start the daemon,
//	            registers, or (the daemon) decides to stop
//	daemon      the daemon's "<pid>:<start time>"
//	env.json    the Env's exported fields (addresses, credentials), once ready
//	error       why the control plane did not start, if it did not
//	users/PID   one file per test process using it
//	daemon.log  the daemon's output
//
// The daemon stops the control plane and removes the folder when the go
// command has exited, or when no test process has used it for
// sharedIdle.
const (
	sharedDirEnv    = "LOOM_TESTENV_SHARED_DIR"
	sharedParentEnv = "LOOM_TESTENV_SHARED_PARENT"
	sharedOptsEnv   = "LOOM_TESTENV_SHARED_OPTIONS"
	sharedPrefix    = "loom-testenv-shared-"
	sharedIdle      = 10 * time.Second
)

// ErrShared is returned by the methods that stop or restart a server
// (StopAPIServer, RestartAPIServer, StopEtcd and the like) of a control
// plane shared across packages: other packages' tests are using it.
var ErrShared = errors.New("testenv: the control plane is shared across packages; its servers cannot be stopped or restarted from a test")

// optionsKey names opts for sharing: equal options, equal keys. CRD
// paths count as absolute paths; the Logger does not count.
func optionsKey(opts Options) (string, error) {
	key := opts
	key.Logger = nil
	key.CRDs = nil
	for _, c := range opts.CRDs {
		abs, err := filepath.Abs(c)
		if err != nil {
			return "", fmt.Errorf("testenv: %w", err)
		}
		key.CRDs = append(key.CRDs, abs)
	}
	b, err := json.Marshal(key)
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// sharedFolder returns the folder of the control plane for opts in this
// `go test` run: named after the parent process (the go command) and
// the options.
func sharedFolder(opts Options) (dir, optsKey string, err error) {
	optsKey, err = optionsKey(opts)
	if err != nil {
		return "", "", err
	}
	parent := os.Getppid()
	sum := sha256.Sum256([]byte(strconv.Itoa(parent) + ":" + startTime(parent) + "/" + optsKey))
	return filepath.Join(os.TempDir(), sharedPrefix+hex.EncodeToString(sum[:8])), optsKey, nil
}

// lockFolder creates dir if needed and locks it, returning the unlock.
// It retries when the folder was removed while it waited (the daemon
// removes it on its way out, holding the lock).
func lockFolder(dir string) (unlock func(), err error) {
	for {
		if err := os.MkdirAll(filepath.Join(dir, "users"), 0o700); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("testenv: lock %s: %w", dir, err)
		}
		held, err1 := f.Stat()
		now, err2 := os.Stat(filepath.Join(dir, "lock"))
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return func() { f.Close() }, nil // closing releases the lock
		}
		f.Close()
	}
}

// running reports whether the "<pid>:<start time>" in file names a
// process that runs (an exited one that its parent has not reaped yet
// does not).
func running(file string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	pid, start, _ := strings.Cut(string(b), ":")
	n, _ := strconv.Atoi(pid)
	return n > 0 && startTime(n) == start && alive(n)
}

// attachShared returns the control plane for opts shared across the
// packages of this `go test` run, starting its daemon if none runs.
func attachShared(ctx context.Context, opts Options) (*Env, error) {
	dir, optsKey, err := sharedFolder(opts)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		unlock, err := lockFolder(dir)
		if err != nil {
			return nil, err
		}
		if !running(filepath.Join(dir, "daemon")) {
			for _, f := range []string{"env.json", "error"} {
				_ = os.Remove(filepath.Join(dir, f))
			}
			if err := startDaemon(dir, optsKey); err != nil {
				unlock()
				return nil, err
			}
		}
		err = os.WriteFile(filepath.Join(dir, "users", strconv.Itoa(os.Getpid())), nil, 0o600)
		unlock()
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		env, err := waitShared(ctx, dir, opts)
		if errors.Is(err, errDaemonGone) && attempt == 0 {
			continue // it stopped as we arrived: start another
		}
		return env, err
	}
}

var errDaemonGone = errors.New("testenv: the process serving the shared control plane exited")

// startDaemon starts this test binary again as the daemon of dir.
func startDaemon(dir, optsKey string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer logf.Close()
	parent := os.Getppid()
	cmd := exec.Command(self, "-test.run=^$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), sharedDirEnv+"="+dir, sharedOptsEnv+"="+optsKey, sharedParentEnv+"="+strconv.Itoa(parent)+":"+startTime(parent))
	// Its output goes to a file, never to the go command's pipes, which
	// would keep the package's test from ending; its own session keeps
	// it out of the test's process group.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start the shared control plane: %w", err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return os.WriteFile(filepath.Join(dir, "daemon"), []byte(strconv.Itoa(pid)+":"+startTime(pid)), 0o600)
}

// waitShared waits until the daemon of dir has written env.json, and
// returns the Env it describes.
func waitShared(ctx context.Context, dir string, opts Options) (*Env, error) {
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "env.json")); err == nil {
			return attachedEnv(b, dir, opts)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "error")); err == nil {
			return nil, fmt.Errorf("testenv: the shared control plane did not start: %s", b)
		}
		if !running(filepath.Join(dir, "daemon")) {
			return nil, fmt.Errorf("%w (its log: %s)", errDaemonGone, filepath.Join(dir, "daemon.log"))
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return nil, fmt.Errorf("testenv: waiting for the shared control plane: %w", err)
		}
	}
}

// attachedEnv is an Env for a control plane another process runs, from
// the exported fields that process wrote to env.json.
func attachedEnv(envJSON []byte, dir string, opts Options) (*Env, error) {
	e := &Env{opts: opts, sharedDir: dir, log: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))}
	if err := json.Unmarshal(envJSON, e); err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", filepath.Join(dir, "env.json"), err)
	}
	ca, err := loadOrCreateCA(e.Dir, "ca", "loom-testenv-ca")
	if err != nil {
		return nil, err
	}
	e.ca = ca
	return e, nil
}

// serveShared is the daemon: it starts the control plane for opts,
// publishes it in dir, and stops it when the go command has exited or
// no test process has used it for sharedIdle. It returns the exit code.
func serveShared(dir string, opts Options) int {
	if key, err := optionsKey(opts); err != nil || key != os.Getenv(sharedOptsEnv) {
		msg := "the package's Shared.Main serves other Options than those asked for: a package can share only the control plane whose Shared runs its TestMain"
		_ = os.WriteFile(filepath.Join(dir, "error"), []byte(msg), 0o600)
		fmt.Fprintln(os.Stderr, msg)
		return 2
	}
	parent := os.Getenv(sharedParentEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	env, err := Start(ctx, opts)
	cancel()
	if err != nil {
		_ = os.WriteFile(filepath.Join(dir, "error"), []byte(err.Error()), 0o600)
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := json.Marshal(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		return 1
	}
	tmp := filepath.Join(dir, "env.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, filepath.Join(dir, "env.json"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		return 1
	}
	lastUsed := time.Now()
	for {
		time.Sleep(250 * time.Millisecond)
		pid, start, _ := strings.Cut(parent, ":")
		n, _ := strconv.Atoi(pid)
		goDone := n <= 0 || startTime(n) != start
		if liveUsers(dir) > 0 {
			lastUsed = time.Now()
		}
		if !goDone && time.Since(lastUsed) < sharedIdle {
			continue
		}
		unlock, err := lockFolder(dir)
		if err != nil {
			break
		}
		if !goDone && liveUsers(dir) > 0 {
			unlock() // one arrived as we decided
			continue
		}
		_ = os.RemoveAll(dir)
		unlock()
		break
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// liveUsers counts the test processes registered in dir that still run,
// removing the files of those that do not.
func liveUsers(dir string) int {
	entries, _ := os.ReadDir(filepath.Join(dir, "users"))
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && alive(pid) {
			n++
			continue
		}
		_ = os.Remove(filepath.Join(dir, "users", e.Name()))
	}
	return n
}
