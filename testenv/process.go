package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// parentEnv is the variable that marks a child with the identity of the
// process that started it, as "<pid>:<start time>", so that a later run can
// sweep children whose parent is gone.
const parentEnv = "LOOM_TESTENV_PARENT"

// proc is one server process, run in its own process group with its output
// appended to a log file.
type proc struct {
	name    string
	path    string
	args    []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
	err  error         // its exit error, valid once done is closed
}

// start runs the process. It must not be running.
func (p *proc) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("testenv: %s log: %w", p.name, err)
	}
	fmt.Fprintf(logf, "==== %s starting %s %s\n", time.Now().Format(time.RFC3339), p.path, strings.Join(p.args, " "))
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), parentEnv+"="+selfIdentity())
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("testenv: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.err = cmd, done, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited returns a channel closed when the current process exits.
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// pid returns the process ID, or 0 if it never started.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exitErr describes how the process ended, with the tail of its log.
func (p *proc) exitErr() error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err == nil {
		err = errors.New("exited with status 0")
	}
	return fmt.Errorf("testenv: %s exited early: %w\n%s", p.name, err, tail(p.logPath, 20))
}

// signal sends sig to the whole process group.
func (p *proc) signal(sig syscall.Signal) {
	if pid := p.pid(); pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

// stop asks the process to exit with SIGTERM, and kills its group after
// grace. It returns once the process has exited. A zero grace kills at once.
func (p *proc) stop(grace time.Duration) {
	done := p.exited()
	select {
	case <-done:
		return
	default:
	}
	if grace > 0 {
		p.signal(syscall.SIGTERM)
		select {
		case <-done:
			p.signal(syscall.SIGKILL) // anything left in the group
			return
		case <-time.After(grace):
		}
	}
	p.signal(syscall.SIGKILL)
	<-done
}

// tail returns the last n lines of a file, indented, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "  last lines of %s:\n", path)
	for _, l := range lines {
		sb.WriteString("  | ")
		sb.Write(l)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// selfIdentity is this process's "<pid>:<start time>".
func selfIdentity() string {
	pid := os.Getpid()
	return strconv.Itoa(pid) + ":" + startTime(pid)
}

// startTime reads a process's start time (in clock ticks since boot) from
// /proc, or "" if it is not running. Together with the PID it names a
// process uniquely, even after PID reuse.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name is in parentheses and may hold spaces: skip past it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(string(b[i+1:]))
	// Field 22 of stat is starttime; fields here start at field 3.
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// sweepOrphans kills server processes left by an earlier testenv whose
// parent is gone. It returns the PIDs it killed.
func sweepOrphans() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		owner, ok := environValue(pid, parentEnv)
		if !ok || owner == "" {
			continue
		}
		ppidStr, start, _ := strings.Cut(owner, ":")
		ppid, _ := strconv.Atoi(ppidStr)
		if ppid > 0 && startTime(ppid) == start {
			continue // its testenv is alive
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		killed = append(killed, pid)
	}
	return killed
}

// environValue returns the value of the variable name in the
// environment a process started with, read from /proc.
func environValue(pid int, name string) (string, bool) {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", false
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			return string(v), true
		}
	}
	return "", false
}

// alive reports whether a process with this PID exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

const (
	tempPrefix = "loom-testenv-"
	ownerFile  = "owner"
)

// sweepStaleDirs removes temporary state folders whose owner (recorded
// as "<pid>:<start time>" in the folder) is no longer running: what a
// test binary killed before its Stop leaves behind. Folders without an
// owner file, or whose owner runs, are left alone.
func sweepStaleDirs() []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	var removed []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pidStr, start, _ := strings.Cut(string(b), ":")
		pid, _ := strconv.Atoi(pidStr)
		if pid > 0 && startTime(pid) == start {
			continue
		}
		if os.RemoveAll(d) == nil {
			removed = append(removed, d)
		}
	}
	return removed
}
