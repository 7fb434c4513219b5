package tracesvg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var t0 = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

// at returns t0 plus ms milliseconds.
func at(ms float64) time.Time {
	return t0.Add(time.Duration(ms * float64(time.Millisecond)))
}

// sp builds a span from start and end offsets in milliseconds.
func sp(id, parent, name, service string, start, end float64) Span {
	return Span{ID: id, Parent: parent, Name: name, Service: service, Start: at(start), End: at(end)}
}

// parsedRow is what the tests read back of one drawn span.
type parsedRow struct {
	id     string
	depth  int
	name   string
	nameX  float64
	barX   float64
	barW   float64
	fill   string
	note   string
	hasBar bool
}

// picture is what the tests read back of a rendered SVG.
type picture struct {
	width, height string
	title         string // text of the visible title, if any
	rows          []parsedRow
	ticks         []string
	services      []string // legend names, in order
	swatches      []string // legend colours, in order
}

// parse decodes every token of svg, failing the test if it is not
// well-formed XML, and collects the parts the tests look at.
func parse(t *testing.T, svg []byte) picture {
	t.Helper()
	var p picture
	d := xml.NewDecoder(bytes.NewReader(svg))
	var stack []xml.StartElement // open elements
	var text strings.Builder
	cur := -1 // index in p.rows of the open span group
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("output is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			tok = tok.Copy()
			stack = append(stack, tok)
			text.Reset()
			class := attr(tok, "class")
			switch {
			case tok.Name.Local == "svg":
				if tok.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace = %q", tok.Name.Space)
				}
				p.width, p.height = attr(tok, "width"), attr(tok, "height")
			case tok.Name.Local == "g" && class == "span":
				depth, err := strconv.Atoi(attr(tok, "data-depth"))
				if err != nil {
					t.Fatalf("bad data-depth: %v", err)
				}
				p.rows = append(p.rows, parsedRow{id: attr(tok, "data-id"), depth: depth})
				cur = len(p.rows) - 1
			case tok.Name.Local == "rect" && class == "bar":
				r := &p.rows[cur]
				r.barX, r.barW = fattr(t, tok, "x"), fattr(t, tok, "width")
				r.fill, r.hasBar = attr(tok, "fill"), true
			case tok.Name.Local == "text" && class == "name":
				p.rows[cur].nameX = fattr(t, tok, "x")
			case tok.Name.Local == "rect" && class == "swatch":
				p.swatches = append(p.swatches, attr(tok, "fill"))
			}
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			open := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			s := text.String()
			switch class := attr(open, "class"); {
			case open.Name.Local == "g" && class == "span":
				cur = -1
			case class == "name":
				p.rows[cur].name = s
			case class == "note":
				p.rows[cur].note = s
			case class == "title":
				p.title = s
			case class == "tick":
				p.ticks = append(p.ticks, s)
			case class == "service":
				p.services = append(p.services, s)
			}
			text.Reset()
		}
	}
	if len(stack) != 0 {
		t.Fatalf("unclosed elements: %v", stack)
	}
	return p
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}

func fattr(t *testing.T, e xml.StartElement, name string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(attr(e, name), 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", e.Name.Local, name, attr(e, name), err)
	}
	return f
}

func render(t *testing.T, spans []Span, opts Options) picture {
	t.Helper()
	var buf bytes.Buffer
	if err := Render(&buf, spans, opts); err != nil {
		t.Fatalf("Render: %v", err)
	}
	return parse(t, buf.Bytes())
}

func names(p picture) []string {
	var n []string
	for _, r := range p.rows {
		n = append(n, r.name)
	}
	return n
}

// sample is a small but complete trace of three services.
func sample() []Span {
	spans := []Span{
		sp("1", "", "POST /api/v1/workloads", "gateway", 0, 182),
		sp("2", "1", "authenticate", "gateway", 2, 14),
		sp("3", "2", "GET /oidc/userinfo", "identity", 4, 12.5),
		sp("4", "1", "authorize workloads.create", "policy", 15, 21),
		sp("5", "4", "evaluate rule team-quota", "policy", 16, 19),
		sp("6", "1", "create Workload", "apiserver", 22, 170),
		sp("7", "6", "admission webhooks", "apiserver", 23, 61),
		sp("8", "7", "validate spec.containers[0].resources.limits against namespace quota", "policy", 25, 58),
		sp("9", "6", "etcd txn /registry/workloads/team-a/web", "apiserver", 63, 150),
		sp("10", "6", "emit event Created", "apiserver", 150, 150),
		sp("11", "1", "write audit record", "gateway", 171, 180),
		sp("12", "1", "respond", "gateway", 181, 182),
	}
	spans[0].Note = "201"
	spans[3].Note = "allowed"
	spans[6].Note = "2 hooks"
	spans[9].Note = "Normal"
	return spans
}

func TestRenderIsWellFormed(t *testing.T) {
	many := make([]Span, 0, 30)
	for i := range 30 {
		svc := "svc-" + strconv.Itoa(i%len(palette)+3)
		many = append(many, sp(strconv.Itoa(i), "", "op", svc, float64(i), float64(i)+0.5))
	}
	tests := []struct {
		name  string
		spans []Span
		opts  Options
		rows  int
	}{
		{"one span", []Span{sp("a", "", "only", "s", 0, 10)}, Options{}, 1},
		{"sample", sample(), Options{Title: "Create a workload"}, 12},
		{"narrow", sample(), Options{Width: 400}, 12},
		{"narrow with notes", []Span{{ID: "a", Name: "a", Start: at(0), End: at(4.2), Note: strings.Repeat("n", 200)}}, Options{Width: 400}, 1},
		{"wide", sample(), Options{Width: 4000}, 12},
		{"all zero duration", []Span{sp("a", "", "x", "s", 5, 5), sp("b", "a", "y", "s", 5, 5)}, Options{}, 2},
		{"sub-millisecond", []Span{sp("a", "", "x", "s", 0, 0.003), sp("b", "a", "y", "s", 0.001, 0.002)}, Options{}, 2},
		{"hours", []Span{sp("a", "", "x", "s", 0, 3*3600e3)}, Options{}, 1},
		{"empty strings", []Span{{Start: t0, End: t0}}, Options{}, 1},
		{"control characters", []Span{sp("\x00", "", "a\x01b\nc", "\x7f", 0, 1)}, Options{Title: "t\x02"}, 1},
		{"unicode", []Span{sp("ü", "", "größe → 世界 🌍", "サービス", 0, 1)}, Options{}, 1},
		{"more services than colours", many, Options{}, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := render(t, tt.spans, tt.opts)
			if len(p.rows) != tt.rows {
				t.Errorf("got %d rows, want %d", len(p.rows), tt.rows)
			}
			for i, r := range p.rows {
				if !r.hasBar {
					t.Errorf("row %d (%q) has no bar", i, r.name)
				}
			}
			if len(p.ticks) < 2 {
				t.Errorf("got ticks %q, want at least two", p.ticks)
			}
			if p.ticks[0] != "0 ms" {
				t.Errorf("first tick = %q, want \"0 ms\"", p.ticks[0])
			}
			want := tt.opts.Width
			if want == 0 {
				want = 1200
			}
			if p.width != strconv.Itoa(want) {
				t.Errorf("width = %q, want %d", p.width, want)
			}
			if p.title != tt.opts.Title && !strings.ContainsRune(tt.opts.Title, 2) {
				t.Errorf("title = %q, want %q", p.title, tt.opts.Title)
			}
		})
	}
}

func TestTreeOrder(t *testing.T) {
	tests := []struct {
		name   string
		spans  []Span
		want   []string
		depths []int
	}{
		{
			name: "children follow parent, by start time",
			spans: []Span{
				sp("c2", "r", "c2", "s", 50, 60),
				sp("g1", "c1", "g1", "s", 12, 14),
				sp("r", "", "r", "s", 0, 100),
				sp("c1", "r", "c1", "s", 10, 20),
				sp("g0", "c1", "g0", "s", 11, 12),
				sp("c3", "r", "c3", "s", 70, 80),
			},
			want:   []string{"r", "c1", "g0", "g1", "c2", "c3"},
			depths: []int{0, 1, 2, 2, 1, 1},
		},
		{
			name: "several roots sorted by start, unknown parent is a root",
			spans: []Span{
				sp("b", "", "b", "s", 20, 30),
				sp("orphan", "missing", "orphan", "s", 5, 6),
				sp("a", "", "a", "s", 0, 10),
				sp("a1", "a", "a1", "s", 1, 2),
			},
			want:   []string{"a", "a1", "orphan", "b"},
			depths: []int{0, 1, 0, 0},
		},
		{
			name: "equal starts keep input order",
			spans: []Span{
				sp("r", "", "r", "s", 0, 10),
				sp("x", "r", "x", "s", 1, 2),
				sp("y", "r", "y", "s", 1, 3),
				sp("z", "r", "z", "s", 1, 1),
			},
			want:   []string{"r", "x", "y", "z"},
			depths: []int{0, 1, 1, 1},
		},
		{
			name: "duplicate IDs: children attach to the first",
			spans: []Span{
				sp("d", "", "first", "s", 0, 10),
				sp("d", "", "second", "s", 1, 10),
				sp("k", "d", "child", "s", 5, 6),
			},
			want:   []string{"first", "child", "second"},
			depths: []int{0, 1, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := render(t, tt.spans, Options{})
			if got := names(p); !slicesEqual(got, tt.want) {
				t.Fatalf("rows = %q, want %q", got, tt.want)
			}
			for i, r := range p.rows {
				if r.depth != tt.depths[i] {
					t.Errorf("row %q: depth %d, want %d", r.name, r.depth, tt.depths[i])
				}
				// Indentation grows with depth.
				if want := p.rows[0].nameX + float64(r.depth*indentStep) - float64(p.rows[0].depth*indentStep); math.Abs(r.nameX-want) > 0.01 {
					t.Errorf("row %q: name x = %v, want %v", r.name, r.nameX, want)
				}
			}
		})
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEscaping(t *testing.T) {
	const nasty = `<a&b> "q" 'x'`
	s := sp(nasty, nasty, nasty, nasty, 0, 10)
	s.Note = nasty
	var buf bytes.Buffer
	if err := Render(&buf, []Span{s}, Options{Title: nasty}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("<a&b>")) {
		t.Errorf("output contains unescaped text:\n%s", buf.Bytes())
	}
	p := parse(t, buf.Bytes())
	r := p.rows[0]
	for what, got := range map[string]string{
		"title": p.title, "name": r.name, "id": r.id, "note": r.note, "service": p.services[0],
	} {
		if got != nasty {
			t.Errorf("%s = %q, want %q", what, got, nasty)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name  string
		spans []Span
		opts  Options
		want  []string // substrings of the error
	}{
		{"nil", nil, Options{}, []string{"no spans"}},
		{"empty", []Span{}, Options{}, []string{"no spans"}},
		{
			"end before start",
			[]Span{sp("ok", "", "fine", "s", 0, 10), sp("bad-id", "ok", "backwards", "s", 5, 4)},
			Options{},
			[]string{"bad-id", "backwards", "ends before it starts"},
		},
		{"negative width", []Span{sp("a", "", "a", "s", 0, 1)}, Options{Width: -5}, []string{"width -5"}},
		{"too narrow", []Span{sp("a", "", "a", "s", 0, 1)}, Options{Width: 399}, []string{"width 399"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Render(&buf, tt.spans, tt.opts)
			if err == nil {
				t.Fatal("Render succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if buf.Len() != 0 {
				t.Errorf("Render wrote %d bytes despite the error", buf.Len())
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	err := Render(failWriter{}, sample(), Options{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Render = %v, want the writer's error", err)
	}
}

func TestCycles(t *testing.T) {
	tests := []struct {
		name  string
		spans []Span
		want  []string
	}{
		{
			name:  "own parent",
			spans: []Span{sp("a", "a", "a", "s", 0, 1)},
			want:  []string{"a"},
		},
		{
			name: "two-cycle with a child hanging off",
			spans: []Span{
				sp("a", "b", "a", "s", 0, 10),
				sp("b", "a", "b", "s", 1, 10),
				sp("c", "b", "c", "s", 2, 3),
			},
			want: []string{"a", "b", "c"},
		},
		{
			name: "chain leading into a cycle",
			spans: []Span{
				sp("x", "y", "x", "s", 3, 4),
				sp("y", "p", "y", "s", 2, 5),
				sp("p", "q", "p", "s", 0, 10),
				sp("q", "r", "q", "s", 1, 10),
				sp("r", "p", "r", "s", 1.5, 10),
				sp("root", "", "root", "s", -1, 11),
			},
			want: []string{"root", "p", "y", "x", "q", "r"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type result struct {
				out []byte
				err error
			}
			done := make(chan result, 1)
			go func() {
				var buf bytes.Buffer
				err := Render(&buf, tt.spans, Options{})
				done <- result{buf.Bytes(), err}
			}()
			select {
			case r := <-done:
				if r.err != nil {
					t.Fatalf("Render: %v", r.err)
				}
				if got := names(parse(t, r.out)); !slicesEqual(got, tt.want) {
					t.Errorf("rows = %q, want %q", got, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Render did not return: looping on a cycle?")
			}
		})
	}
}

func TestBreakCyclesLarge(t *testing.T) {
	// A long chain closed into one cycle, plus a long chain without one:
	// every node must end up with a path to a root.
	const n = 100000
	parent := make([]int, 2*n)
	for i := range n {
		parent[i] = (i + 1) % n
		parent[n+i] = n + i - 1
	}
	breakCycles(parent)
	for i := range n {
		if parent[i] != -1 {
			t.Fatalf("node %d on the cycle still has parent %d", i, parent[i])
		}
	}
	if parent[n] != n-1 || parent[2*n-1] != 2*n-2 {
		t.Fatalf("chain changed: %d, %d", parent[n], parent[2*n-1])
	}
}

func TestBarsScaleWithTime(t *testing.T) {
	spans := []Span{
		sp("r", "", "root", "s", 0, 100),
		sp("a", "r", "a", "s", 20, 60),
		sp("b", "r", "b", "s", 60, 100),
		sp("z", "r", "zero", "s", 30, 30),
		sp("q", "r", "tiny", "s", 70, 70.001),
	}
	for _, width := range []int{0, 400, 600, 1800} {
		p := render(t, spans, Options{Width: width})
		root, a, zero, b, tiny := p.rows[0], p.rows[1], p.rows[2], p.rows[3], p.rows[4]
		if root.name != "root" || a.name != "a" || zero.name != "zero" || b.name != "b" || tiny.name != "tiny" {
			t.Fatalf("unexpected rows %q", names(p))
		}
		perMS := root.barW / 100
		if perMS <= 0 {
			t.Fatalf("root bar width %v", root.barW)
		}
		near := func(what string, got, want float64) {
			t.Helper()
			if math.Abs(got-want) > 0.02 {
				t.Errorf("width %d: %s = %.2f, want %.2f", width, what, got, want)
			}
		}
		near("a.x", a.barX, root.barX+20*perMS)
		near("a.width", a.barW, 40*perMS)
		near("b.x", b.barX, root.barX+60*perMS)
		near("b.width", b.barW, 40*perMS)
		near("a.x+a.width", a.barX+a.barW, b.barX)
		near("zero.x", zero.barX, root.barX+30*perMS)
		near("zero.width", zero.barW, minBarW)
		near("tiny.width", tiny.barW, minBarW)
		// The chart is most of the image, whatever its width.
		if w := p.width; root.barW < 0.4*mustFloat(t, w) {
			t.Errorf("width %s: root bar only %.1f px wide", w, root.barW)
		}
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestTruncation(t *testing.T) {
	long := strings.Repeat("very-long-operation-name-", 20)
	spans := []Span{
		sp("r", "", long, "s", 0, 10),
		sp("c", "r", "short", "s", 1, 2),
		sp("d", "c", "日本語"+long, "s", 1, 2),
	}
	p := render(t, spans, Options{Width: 800})
	for _, r := range []parsedRow{p.rows[0], p.rows[2]} {
		if !strings.HasSuffix(r.name, "…") {
			t.Errorf("long name not cut: %q", r.name)
		}
		if !utf8.ValidString(r.name) {
			t.Errorf("cut name is not valid UTF-8: %q", r.name)
		}
		// The label must end before the chart starts.
		end := r.nameX + float64(utf8.RuneCountInString(r.name))*labelCharW
		if end > p.rows[0].barX {
			t.Errorf("label %q ends at %.1f, after the chart start %.1f", r.name, end, p.rows[0].barX)
		}
	}
	if p.rows[1].name != "short" {
		t.Errorf("short name changed to %q", p.rows[1].name)
	}
	// Deeper rows have less room.
	if a, b := utf8.RuneCountInString(p.rows[0].name), utf8.RuneCountInString(p.rows[2].name); b >= a {
		t.Errorf("depth-2 label has %d runes, root label %d", b, a)
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"abcd", 1, "…"},
		{"abcd", 0, ""},
		{"", 0, ""},
		{"äöüß", 3, "äö…"},
	}
	for _, tt := range tests {
		if got := truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestServiceColours(t *testing.T) {
	spans := []Span{
		sp("r", "", "r", "gateway", 0, 100),
		sp("b", "r", "b", "db", 50, 60),
		sp("a", "r", "a", "auth", 10, 20),
		sp("a2", "r", "a2", "auth", 30, 40),
		sp("g", "r", "g", "gateway", 70, 80),
		sp("n", "r", "n", "", 80, 90),
	}
	p := render(t, spans, Options{})
	// Legend in order of first appearance in the rows.
	if want := []string{"gateway", "auth", "db", "(no service)"}; !slicesEqual(p.services, want) {
		t.Errorf("legend = %q, want %q", p.services, want)
	}
	if want := palette[:4]; !slicesEqual(p.swatches, want) {
		t.Errorf("legend colours = %q, want %q", p.swatches, want)
	}
	fill := map[string]string{}
	for _, r := range p.rows {
		fill[r.name] = r.fill
	}
	if fill["r"] != fill["g"] || fill["a"] != fill["a2"] {
		t.Errorf("same service, different colours: %v", fill)
	}
	if fill["r"] != palette[0] || fill["a"] != palette[1] || fill["b"] != palette[2] || fill["n"] != palette[3] {
		t.Errorf("colours = %v, want palette order of first appearance", fill)
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		name  string
		end   float64 // ms
		width int
		want  []string
	}{
		{"100 ms", 100, 1200, []string{"0 ms", "20 ms", "40 ms", "60 ms", "80 ms", "100 ms"}},
		{"182 ms narrow", 182, 600, []string{"0 ms", "50 ms", "100 ms", "150 ms"}},
		{"4.2 ms narrowest", 4.2, 400, []string{"0 ms", "2 ms", "4 ms"}},
		{"1.001 s", 1001, 1200, []string{"0 ms", "200 ms", "400 ms", "600 ms", "800 ms", "1000 ms"}},
		{"3 µs", 0.003, 600, []string{"0 ms", "0.001 ms", "0.002 ms", "0.003 ms"}},
		{"7.5 ms", 7.5, 600, []string{"0 ms", "2 ms", "4 ms", "6 ms"}},
		{"0.9 ms", 0.9, 600, []string{"0 ms", "0.5 ms"}},
		{"450 µs", 0.45, 1200, []string{"0 ms", "0.05 ms", "0.1 ms", "0.15 ms", "0.2 ms", "0.25 ms", "0.3 ms", "0.35 ms", "0.4 ms", "0.45 ms"}},
		{"zero", 0, 600, []string{"0 ms", "0.5 ms", "1 ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := render(t, []Span{sp("a", "", "a", "s", 0, tt.end)}, Options{Width: tt.width})
			if !slicesEqual(p.ticks, tt.want) {
				t.Errorf("ticks = %q, want %q", p.ticks, tt.want)
			}
		})
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct {
		d        int64
		maxTicks int
		want     int64
	}{
		{0, 5, 1},
		{1, 5, 1},
		{100, 10, 10},
		{101, 10, 20},
		{182e6, 4, 50e6},
		{182e6, 10, 20e6},
		{999e6, 2, 500e6},
		{1001e6, 2, 1e9},
		{3 * 3600e9, 10, 2e12},
	}
	for _, tt := range tests {
		if got := niceStep(tt.d, tt.maxTicks); got != tt.want {
			t.Errorf("niceStep(%d, %d) = %d, want %d", tt.d, tt.maxTicks, got, tt.want)
		}
	}
}

func TestDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := Render(&a, sample(), Options{Title: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := Render(&b, sample(), Options{Title: "x"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two renderings of the same trace differ")
	}
}

// TestWriteSample writes the sample trace to the file named by
// $TRACESVG_SAMPLE, for looking at the picture:
//
//	TRACESVG_SAMPLE=/tmp/tracesvg-sample.svg go test -run WriteSample ./internal/tracesvg/
func TestWriteSample(t *testing.T) {
	path := os.Getenv("TRACESVG_SAMPLE")
	if path == "" {
		t.Skip("TRACESVG_SAMPLE not set")
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Render(f, sample(), Options{Title: "POST /api/v1/workloads — trace 4bf92f35"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
