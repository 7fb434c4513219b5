package workqueue_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/script/*.txt")

// TestScript runs the golden scripts in testdata/script, each on a queue
// in a testing/synctest bubble, whose time moves only on "step". A script
// is a sequence of blocks: command lines, a "----" line, then the output
// those commands must print, up to a blank line. Lines starting with #
// are comments. Commands:
//
//	add X...            Add each X
//	addp P X...         AddWithPriority(X, P) for each X
//	after X DUR         AddAfter(X, DUR)
//	afterp X DUR P      AddAfterWithPriority(X, DUR, P)
//	ratelimited X       AddRateLimited(X)
//	ratelimitedp X P    AddRateLimitedWithPriority(X, P)
//	forget X            Forget(X)
//	step DUR            move the time forward
//	get                 print the item Get hands out, "shutdown" if it
//	                    reports shutdown, or "(none ready)" without calling
//	                    it if it would block
//	done X              Done(X)
//	len                 print Len
//	requeues X          print NumRequeues(X)
//	shutdown            ShutDown
//
// Run with -rewrite to regenerate the expected output after a deliberate
// change, then review the diff.
func TestScript(t *testing.T) {
	files, err := filepath.Glob("testdata/script/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := string(data)
			var got string
			synctest.Test(t, func(t *testing.T) { got = runScript(t, want) })
			if got == want {
				return
			}
			if *rewrite {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Errorf("%s: output differs (run with -rewrite to update)\n--- got\n%s\n--- want\n%s", file, got, want)
		})
	}
}

// runScript executes script and returns it with every block's output
// replaced by what the commands printed.
func runScript(t *testing.T, script string) string {
	t.Helper()
	q := workqueue.New(workqueue.Options[string]{})
	defer q.ShutDown()

	var out strings.Builder
	lines := strings.Split(script, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		// A block: commands up to "----", then old output up to a blank line.
		var printed []string
		for ; i < len(lines) && lines[i] != "----"; i++ {
			out.WriteString(lines[i] + "\n")
			printed = append(printed, runCommand(t, q, lines[i])...)
		}
		out.WriteString("----\n")
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
		}
		for _, p := range printed {
			out.WriteString(p + "\n")
		}
		if i < len(lines) {
			out.WriteString("\n")
		}
	}
	return strings.TrimRight(out.String(), "\n") + "\n"
}

func runCommand(t *testing.T, q *workqueue.Queue[string], line string) []string {
	t.Helper()
	f := strings.Fields(line)
	arg := func(n int) string {
		if len(f) <= n {
			t.Fatalf("%q: missing argument %d", line, n)
		}
		return f[n]
	}
	dur := func(s string) time.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return d
	}
	prio := func(s string) int {
		p, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return p
	}
	switch f[0] {
	case "add":
		for _, item := range f[1:] {
			q.Add(item)
		}
	case "addp":
		p := prio(arg(1))
		for _, item := range f[2:] {
			q.AddWithPriority(item, p)
		}
	case "after":
		q.AddAfter(arg(1), dur(arg(2)))
	case "afterp":
		q.AddAfterWithPriority(arg(1), dur(arg(2)), prio(arg(3)))
	case "ratelimited":
		q.AddRateLimited(arg(1))
	case "ratelimitedp":
		q.AddRateLimitedWithPriority(arg(1), prio(arg(2)))
	case "forget":
		q.Forget(arg(1))
	case "step":
		step(dur(arg(1)))
	case "get":
		if q.Len() == 0 && !q.ShuttingDown() {
			return []string{"(none ready)"}
		}
		item, ok := q.Get()
		if !ok {
			return []string{"shutdown"}
		}
		return []string{item}
	case "done":
		q.Done(arg(1))
	case "len":
		return []string{"len " + strconv.Itoa(q.Len())}
	case "requeues":
		return []string{fmt.Sprintf("requeues %s %d", arg(1), q.NumRequeues(arg(1)))}
	case "shutdown":
		q.ShutDown()
	default:
		t.Fatalf("%q: unknown command", line)
	}
	return nil
}
