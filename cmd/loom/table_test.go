package main

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"text/tabwriter"
)

// TestTabWriterAlignsAsTextTabwriter compares tabWriter, not remembering
// widths, with text/tabwriter (which kubectl's tabwriter is a fork of) on
// random text: lines with different numbers of cells, so columns in
// separate blocks; empty and multi-byte cells, vertical tabs, form feeds,
// and a last line without a newline.
func TestTabWriterAlignsAsTextTabwriter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"", "a", "web", "Running", "10.244.0.12", "kwok-node-0", "ünïcødé", "日本語", "<none>", "a-much-longer-cell-value"}
	seps := []string{"\t", "\t", "\t", "\v", "\n", "\n", "\n", "\f"}
	for i := range 2000 {
		var in strings.Builder
		for range r.IntN(40) {
			in.WriteString(words[r.IntN(len(words))])
			in.WriteString(seps[r.IntN(len(seps))])
		}
		var want, got bytes.Buffer
		tw := tabwriter.NewWriter(&want, 6, 4, 3, ' ', 0)
		tw.Write([]byte(in.String()))
		tw.Flush()
		w := &tabWriter{out: &got}
		w.Write([]byte(in.String()))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("case %d: input %q\ngot  %q\nwant %q", i, in.String(), got.String(), want.String())
		}
	}
}

// TestTabWriterRemembersWidths: rows flushed one by one (a watch) keep
// the widths seen so far, and widen the columns for later rows when
// wider; forgetWidths starts again.
func TestTabWriterRemembersWidths(t *testing.T) {
	var out bytes.Buffer
	w := newTableWriter(&out)
	for _, line := range []string{
		"NAME\tSTATUS\tAGE\nweb\tRunning\t5s\n",
		"a\tPending\t0s\n",
		"a\tTerminating\t1s\n",
		"b\tRunning\t2s\n",
	} {
		w.Write([]byte(line))
		w.Flush()
	}
	w.forgetWidths()
	w.Write([]byte("x\ty\n"))
	w.Flush()
	want := "" +
		"NAME   STATUS    AGE\n" +
		"web    Running   5s\n" +
		"a      Pending   0s\n" +
		"a      Terminating   1s\n" +
		"b      Running       2s\n" +
		"x     y\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestCellText(t *testing.T) {
	for _, tt := range []struct {
		cell any
		want string
	}{
		{nil, ""},
		{"plain", "plain"},
		{"two\nlines", "two..."},
		{"cr\rhere", "cr..."},
		{"\x1b[31mred", "^[[31mred"},
		{int64(12345678), "12345678"},
		{1.5, "1.5"},
		{1e21, "1e+21"},
		{true, "true"},
		{[]any{"a", int64(1)}, "[a 1]"},
	} {
		if got := cellText(tt.cell); got != tt.want {
			t.Errorf("cellText(%#v) = %q, want %q", tt.cell, got, tt.want)
		}
	}
}
