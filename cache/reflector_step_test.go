package cache

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestReflectorStepScripts runs testdata/reflector/*.txt: each feeds a
// sequence of events to step and states, after each, the action step
// decides and the state it leaves. A script is a sequence of blocks,
// separated by blank lines,
//
//	event arg...
//	----
//	expected output
//
// where lines starting with '#' between blocks are comments. The events:
//
//	new [streaming=off] [initial=D] [max=D] [rv=X]
//	                        a fresh state (defaults: streaming, 800ms,
//	                        30s, no resourceVersion); prints it
//	start                   Run begins
//	listed rv=X             a paginated list filled the store
//	streamed rv=X           a streaming list's initial events did
//	stream-refused          the server refused a streaming list
//	list-failed WHY         a list or streaming list failed
//	opened                  a watch was opened
//	watch-failed WHY        a watch could not be opened
//	event rv=X              the open watch delivered an object
//	bookmark rv=X           the open watch delivered a bookmark
//	ended [WHY] [lived=D]   the open watch ended (by default cleanly,
//	                        at once)
//	pruned | waited         the prune or the wait is over
//	relist | narrow         Relist or Narrow was called (Run passes the
//	                        calls on just before an action begins)
//	store-failed            the store refused a write
//
// WHY is interrupted (a Relist or Narrow cut the action short), clean, or
// an error, which classify sorts as Run would: gone (410 Gone), refused
// or reset (a connection refused or reset), eof (a truncated response),
// 403, 404, 500, 503, 504, or 429 (with Retry-After: 7). The output is
// the error's class, for these, then the action, then "state: " and the
// state.
//
// With -rewrite (the flag of this package's other scripts), the expected
// outputs are replaced by what step decides: review the diff.
func TestReflectorStepScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "reflector", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/reflector")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runStepScript(t, file)
		})
	}
}

// rewriting reports whether -rewrite was given. The flag belongs to the
// external tests of this package (script_test.go), which share the test
// binary: it cannot be defined twice.
func rewriting() bool {
	f := flag.Lookup("rewrite")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	on, _ := g.Get().(bool)
	return on
}

type stepBlock struct {
	line     int
	event    string
	want     string
	comments []string
}

func parseStepScript(t *testing.T, file string) (blocks []stepBlock, trailer []string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	n := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		n++
		return sc.Text(), true
	}
	var comments []string
	for {
		line, ok := next()
		if !ok {
			break
		}
		switch {
		case strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "#"):
			comments = append(comments, line)
			continue
		}
		b := stepBlock{line: n, event: strings.TrimSpace(line), comments: comments}
		comments = nil
		if sep, ok := next(); !ok || sep != "----" {
			t.Fatalf("%s:%d: want ---- after the event", file, b.line)
		}
		var out []string
		for {
			l, ok := next()
			if !ok || strings.TrimSpace(l) == "" {
				break
			}
			out = append(out, l)
		}
		b.want = strings.Join(out, "\n")
		blocks = append(blocks, b)
	}
	return blocks, comments
}

func runStepScript(t *testing.T, file string) {
	blocks, trailer := parseStepScript(t, file)
	var st reflectorState
	started := false
	var b strings.Builder
	for _, blk := range blocks {
		pos := fmt.Sprintf("%s:%d", file, blk.line)
		words := strings.Fields(blk.event)
		var got string
		if words[0] == "new" {
			st = scriptState(t, pos, words[1:])
			started = true
			got = "state: " + st.String()
		} else {
			if !started {
				t.Fatalf("%s: the first event must be new", pos)
			}
			ev, class := scriptEvent(t, pos, words)
			before := st
			next, act := step(st, ev)
			if again, act2 := step(before, ev); again != next || act2 != act {
				t.Fatalf("%s: step decided differently from the same state and event", pos)
			}
			if st != before {
				t.Fatalf("%s: step changed the state it was given", pos)
			}
			st = next
			got = class + act.String() + "\nstate: " + st.String()
		}
		if rewriting() {
			for _, c := range blk.comments {
				b.WriteString(c + "\n")
			}
			fmt.Fprintf(&b, "%s\n----\n%s\n\n", blk.event, got)
			continue
		}
		if got != blk.want {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", pos, blk.event, got, blk.want)
		}
	}
	if rewriting() {
		for _, c := range trailer {
			b.WriteString(c + "\n")
		}
		if err := os.WriteFile(file, []byte(strings.TrimRight(b.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func scriptState(t *testing.T, pos string, args []string) reflectorState {
	initial, maxBackoff := 800*time.Millisecond, 30*time.Second
	rv, noStream := "", false
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "streaming":
			if v != "off" {
				t.Fatalf("%s: streaming=off or nothing", pos)
			}
			noStream = true
		case "initial":
			initial = scriptDuration(t, pos, v)
		case "max":
			maxBackoff = scriptDuration(t, pos, v)
		case "rv":
			rv = v
		default:
			t.Fatalf("%s: unknown option %q", pos, a)
		}
	}
	return newReflectorState(rv, noStream, initial, maxBackoff)
}

func scriptDuration(t *testing.T, pos, v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", pos, err)
	}
	return d
}

// scriptEvent reads an event, and returns with it the line that says how
// its error was classified ("" without one).
func scriptEvent(t *testing.T, pos string, words []string) (reflectorEvent, string) {
	kinds := map[string]eventKind{}
	for k := evStart; k <= evStoreFailed; k++ {
		kinds[k.String()] = k
	}
	kind, ok := kinds[words[0]]
	if !ok {
		t.Fatalf("%s: unknown event %q", pos, words[0])
	}
	ev := reflectorEvent{kind: kind}
	classLine := ""
	for _, a := range words[1:] {
		k, v, isKV := strings.Cut(a, "=")
		switch {
		case isKV && k == "rv":
			ev.rv = v
		case isKV && k == "lived":
			ev.lived = scriptDuration(t, pos, v)
		case !isKV && (kind == evListFailed || kind == evWatchFailed || kind == evEnded):
			ev.class, ev.retryAfter = scriptClass(t, pos, a)
			classLine = "class: " + ev.class.String()
			if ev.retryAfter > 0 {
				classLine += fmt.Sprintf(", retry after %v", ev.retryAfter)
			}
			classLine += "\n"
		default:
			t.Fatalf("%s: %s: unexpected %q", pos, kind, a)
		}
	}
	if (kind == evListFailed || kind == evWatchFailed) && classLine == "" {
		t.Fatalf("%s: %s needs a reason", pos, kind)
	}
	return ev, classLine
}

// scriptClass classifies the error a script names, as Run would.
func scriptClass(t *testing.T, pos, why string) (failClass, time.Duration) {
	gr := schema.GroupResource{Resource: "configmaps"}
	dial := func(errno syscall.Errno) error {
		return fmt.Errorf("rest: GET /api/v1/configmaps: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)})
	}
	var err error
	switch why {
	case "interrupted":
		return failInterrupted, 0
	case "clean":
		err = nil
	case "gone":
		err = errRelist
	case "refused":
		err = dial(syscall.ECONNREFUSED)
	case "reset":
		err = dial(syscall.ECONNRESET)
	case "eof":
		err = io.ErrUnexpectedEOF
	case "403":
		err = apierrors.NewForbidden(gr, "", errors.New("rbac says no"))
	case "404":
		err = apierrors.NewNotFound(gr, "")
	case "500":
		err = apierrors.NewInternalError(errors.New("etcd is sad"))
	case "503":
		err = apierrors.NewServiceUnavailable("starting")
	case "504":
		err = apierrors.NewTimeoutError("the server was slow", 0)
	case "429":
		err = apierrors.NewTooManyRequests("slow down", 7)
	default:
		t.Fatalf("%s: unknown reason %q", pos, why)
	}
	if err != nil {
		err = &ReflectorError{Name: "script", Phase: "watch", Err: err}
	}
	return classify(err)
}
