package cache_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// This file is a tiny driver for golden scripts in the style of etcd's
// raft testdata: a file is a sequence of blocks
//
//	command arg arg...
//	----
//	expected output
//
// separated by blank lines. Lines starting with '#' outside a block's
// output are comments. With -rewrite, the expected output is replaced by
// the actual output (review the diff before committing it).

var rewrite = flag.Bool("rewrite", false, "rewrite golden script outputs")

type scriptCmd struct {
	line int
	cmd  string
	args []string
	want string
}

func parseScript(t *testing.T, path string) (cmds []scriptCmd, comments map[int][]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	comments = map[int][]string{} // comment lines before command i
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	lineNo := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		lineNo++
		return sc.Text(), true
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			comments[len(cmds)] = append(comments[len(cmds)], line)
			continue
		}
		fields := strings.Fields(line)
		c := scriptCmd{line: lineNo, cmd: fields[0], args: fields[1:]}
		sep, ok := next()
		if !ok || sep != "----" {
			t.Fatalf("%s:%d: want ---- after the command", path, lineNo)
		}
		var out []string
		for {
			l, ok := next()
			if !ok || l == "" {
				break
			}
			out = append(out, l)
		}
		c.want = strings.Join(out, "\n")
		cmds = append(cmds, c)
	}
	return cmds, comments
}

// runScripts runs every file matching pattern, calling exec for each
// command with a fresh state per file made by newState.
func runScripts[S any](t *testing.T, pattern string, newState func() S, exec func(s S, c scriptCmd) string) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s (%v)", pattern, err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cmds, comments := parseScript(t, path)
			s := newState()
			var b strings.Builder
			for i, c := range cmds {
				got := strings.TrimRight(exec(s, c), "\n")
				if got == "" {
					got = "ok"
				}
				if *rewrite {
					for _, cm := range comments[i] {
						b.WriteString(cm + "\n")
					}
					fmt.Fprintf(&b, "%s\n----\n%s\n\n", strings.Join(append([]string{c.cmd}, c.args...), " "), got)
					continue
				}
				if got != c.want {
					t.Errorf("%s:%d: %s %s\n got:\n%s\nwant:\n%s", path, c.line, c.cmd, strings.Join(c.args, " "), got, c.want)
				}
			}
			if *rewrite {
				for _, cm := range comments[len(cmds)] {
					b.WriteString(cm + "\n")
				}
				if err := os.WriteFile(path, []byte(strings.TrimRight(b.String(), "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
