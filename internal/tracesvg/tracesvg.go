package tracesvg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Span is one span of the trace to draw.
type Span struct {
	ID, Parent string // Parent "" or an ID not in the slice means a root
	Name       string
	Service    string // coloured per service, with a legend
	Start, End time.Time
	Note       string // optional short text drawn after the bar (e.g. "201", "allowed")
}

// Options controls the picture.
type Options struct {
	Title string // drawn at the top; empty means none
	Width int    // image width in px; 0 means 1200
}

// Layout constants, in pixels unless noted.
const (
	defaultWidth = 1200
	minWidth     = 400

	margin     = 16
	titleH     = 34 // height of the title band, when there is a title
	axisH      = 26 // height of the tick label band above the rows
	rowH       = 22
	barH       = 14
	indentStep = 14
	legendGap  = 14 // space between the last row and the legend
	legendRowH = 20
	swatch     = 12
	minBarW    = 2.0 // width of the bar of a zero-duration span
	minTickGap = 90  // minimum distance between two axis ticks

	labelFontSize = 12
	noteFontSize  = 11
	tickFontSize  = 11
	titleFontSize = 16

	// Approximate advances of one glyph of the monospace font at the
	// sizes above, used to fit text into its column. They are a little
	// generous so that text fits with common monospace fonts.
	labelCharW = 7.4
	noteCharW  = 6.8
	titleCharW = 9.6 // bold sans-serif; an average, so long titles get room to spare
)

const (
	monoFont = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace"
	sansFont = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, 'DejaVu Sans', sans-serif"

	textColour   = "#1f2328"
	mutedColour  = "#57606a"
	gridColour   = "#d8dee4"
	stripeColour = "#f4f6f8"
)

// palette holds the service colours, assigned in order of first
// appearance and reused from the start when there are more services. They
// are dark enough to stand out on white and distinct from each other.
var palette = []string{
	"#2f6db5", // blue
	"#e07b10", // orange
	"#2e9a58", // green
	"#c8374a", // red
	"#7b52b8", // purple
	"#0f9aa8", // teal
	"#a8701d", // brown
	"#cc4f9e", // pink
	"#5f6b7a", // slate
	"#8a9a1b", // olive
}

// row is one drawn span: its index in the input and its depth in the tree.
type row struct {
	span  int
	depth int
}

// Render writes the SVG. Spans are drawn one per row in tree order
// (depth-first, children after their parent sorted by start time),
// indented by depth, with a horizontal bar from start to end on a shared
// time axis (ticks in ms with sensible steps), the span name on the left
// (indented), the service colour from a fixed palette in order of first
// appearance, and a legend of services. Zero-duration spans get a minimum
// visible width. Text is XML-escaped. Long names are truncated with an
// ellipsis to fit the label column.
//
// Render writes nothing when it returns an error about its input.
func Render(w io.Writer, spans []Span, opts Options) error {
	if len(spans) == 0 {
		return errors.New("tracesvg: no spans to draw")
	}
	for _, s := range spans {
		if s.End.Before(s.Start) {
			return fmt.Errorf("tracesvg: span %q (%q) ends before it starts", s.ID, s.Name)
		}
	}
	width := opts.Width
	if width == 0 {
		width = defaultWidth
	}
	if width < minWidth {
		return fmt.Errorf("tracesvg: width %d is too small (minimum %d)", opts.Width, minWidth)
	}

	var buf bytes.Buffer
	draw(&buf, spans, treeOrder(spans), opts.Title, width)
	_, err := w.Write(buf.Bytes())
	return err
}

// treeOrder returns the rows in drawing order. Every span appears exactly
// once; spans on a cycle of parent links are treated as roots.
func treeOrder(spans []Span) []row {
	n := len(spans)
	index := make(map[string]int, n)
	for i, s := range spans {
		if _, dup := index[s.ID]; !dup {
			index[s.ID] = i
		}
	}
	parent := make([]int, n)
	for i, s := range spans {
		parent[i] = -1
		if s.Parent == "" {
			continue
		}
		if p, ok := index[s.Parent]; ok {
			parent[i] = p
		}
	}
	breakCycles(parent)

	var roots []int
	children := make([][]int, n)
	for i, p := range parent {
		if p < 0 {
			roots = append(roots, i)
		} else {
			children[p] = append(children[p], i)
		}
	}
	byStart := func(a, b int) int { return spans[a].Start.Compare(spans[b].Start) }
	slices.SortStableFunc(roots, byStart)
	for _, c := range children {
		slices.SortStableFunc(c, byStart)
	}

	// Iterative depth-first walk, so that deep traces cannot exhaust the
	// stack. Children are pushed in reverse to pop in start order.
	rows := make([]row, 0, n)
	stack := make([]row, 0, n)
	for i := len(roots) - 1; i >= 0; i-- {
		stack = append(stack, row{roots[i], 0})
	}
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		rows = append(rows, r)
		c := children[r.span]
		for i := len(c) - 1; i >= 0; i-- {
			stack = append(stack, row{c[i], r.depth + 1})
		}
	}
	return rows
}

// breakCycles sets parent to -1 for every node on a cycle of parent
// links, so that following parents from any node ends at a root. It runs
// in time linear in the number of nodes.
func breakCycles(parent []int) {
	// walk[i] is the number (from 1) of the walk that first reached i.
	walk := make([]int, len(parent))
	var path, cycle []int
	for start := range parent {
		if walk[start] != 0 {
			continue
		}
		id := start + 1
		path = path[:0]
		j := start
		for j >= 0 && walk[j] == 0 {
			walk[j] = id
			path = append(path, j)
			j = parent[j]
		}
		// Reaching a node of an earlier walk is fine: its chain ends at a
		// root (cycles found by that walk were broken). Reaching a node of
		// this walk closes a cycle through it.
		if j < 0 || walk[j] != id {
			continue
		}
		k := slices.Index(path, j)
		cycle = append(cycle[:0], path[k:]...)
		for _, c := range cycle {
			parent[c] = -1
		}
	}
}

// draw writes the picture of spans, drawn in the order of rows, to b.
func draw(b *bytes.Buffer, spans []Span, rows []row, title string, width int) {
	// Time domain.
	t0, t1 := spans[0].Start, spans[0].End
	for _, s := range spans[1:] {
		if s.Start.Before(t0) {
			t0 = s.Start
		}
		if s.End.After(t1) {
			t1 = s.End
		}
	}
	// The axis runs from the earliest start to the latest end.
	domain := int64(t1.Sub(t0))
	if domain == 0 {
		// Only zero-duration spans, all at one instant: show one
		// millisecond rather than an axis of nanoseconds.
		domain = int64(time.Millisecond)
	}

	// Columns: labels, chart, then room for the notes (and for half of
	// the last tick label).
	labelW := min(max(float64(width)*0.26, 140), 380)
	longestNote := 0
	for _, s := range spans {
		longestNote = max(longestNote, runeLen(s.Note))
	}
	noteW := 0.0
	if longestNote > 0 {
		noteW = min(float64(longestNote)*noteCharW+10, float64(width)/6)
	}
	chartX0 := margin + labelW
	chartX1 := float64(width) - margin - max(noteW, 28)
	chartW := chartX1 - chartX0

	// At least three steps, so that even a narrow chart gets a tick
	// besides 0 (a nice step can be up to 2.5 times the wanted one).
	maxTicks := max(3, int(chartW/minTickGap))
	step := niceStep(domain, maxTicks)
	xOf := func(t time.Time) float64 {
		return chartX0 + float64(t.Sub(t0))/float64(domain)*chartW
	}

	// Services in order of first appearance in the rows.
	var services []string
	colour := map[string]string{}
	for _, r := range rows {
		s := spans[r.span].Service
		if _, ok := colour[s]; !ok {
			colour[s] = palette[len(services)%len(palette)]
			services = append(services, s)
		}
	}

	// Vertical layout.
	y := float64(margin)
	titleY := 0.0
	if title != "" {
		titleY = y + titleFontSize
		y += titleH
	}
	axisY := y + axisH - 8 // baseline of the tick labels
	rowsTop := y + axisH
	rowsBottom := rowsTop + float64(len(rows)*rowH)
	legend := layoutLegend(services, rowsBottom+legendGap, float64(width))
	height := legend.bottom + margin

	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%s" viewBox="0 0 %d %s" role="img" font-family="%s" font-size="%d">`+"\n",
		width, num(height), width, num(height), monoFont, labelFontSize)
	desc := title
	if desc == "" {
		desc = "Trace timeline"
	}
	fmt.Fprintf(b, "<title>%s</title>\n", esc(desc))
	fmt.Fprintf(b, `<rect class="background" x="0" y="0" width="%d" height="%s" fill="#ffffff"/>`+"\n", width, num(height))
	if title != "" {
		maxRunes := int((float64(width) - 2*margin) / titleCharW)
		fmt.Fprintf(b, `<text class="title" x="%d" y="%s" font-family="%s" font-size="%d" font-weight="600" fill="%s">%s</text>`+"\n",
			margin, num(titleY), sansFont, titleFontSize, textColour, esc(truncate(title, maxRunes)))
	}

	// Row stripes first, so that grid lines and bars are drawn on top.
	for i := range rows {
		if i%2 == 1 {
			fmt.Fprintf(b, `<rect class="stripe" x="%d" y="%s" width="%d" height="%d" fill="%s"/>`+"\n",
				margin, num(rowsTop+float64(i*rowH)), width-2*margin, rowH, stripeColour)
		}
	}

	// Axis: grid lines through the rows, labels above them.
	b.WriteString(`<g class="axis">` + "\n")
	for v := int64(0); v <= domain; v += step {
		x := chartX0 + float64(v)/float64(domain)*chartW
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"/>`+"\n",
			num(x), num(rowsTop-4), num(x), num(rowsBottom), gridColour)
		fmt.Fprintf(b, `<text class="tick" x="%s" y="%s" text-anchor="middle" font-size="%d" fill="%s">%s</text>`+"\n",
			num(x), num(axisY), tickFontSize, mutedColour, tickLabel(v, step))
	}
	b.WriteString("</g>\n")

	// Rows.
	for i, r := range rows {
		s := spans[r.span]
		top := rowsTop + float64(i*rowH)
		baseline := top + rowH/2 + 4
		indent := min(float64(r.depth*indentStep), labelW/2)
		nameRunes := int((labelW - indent - 10) / labelCharW)

		x := xOf(s.Start)
		w := xOf(s.End) - x
		if w < minBarW {
			w = minBarW
			x = min(x, chartX1-w)
		}

		fmt.Fprintf(b, `<g class="span" data-id="%s" data-depth="%d">`+"\n", esc(s.ID), r.depth)
		fmt.Fprintf(b, `<text class="name" x="%s" y="%s" fill="%s">%s</text>`+"\n",
			num(margin+4+indent), num(baseline), textColour, esc(truncate(s.Name, nameRunes)))
		fmt.Fprintf(b, `<rect class="bar" x="%s" y="%s" width="%s" height="%d" rx="2" fill="%s">`,
			num(x), num(top+(rowH-barH)/2), num(w), barH, colour[s.Service])
		fmt.Fprintf(b, `<title>%s</title></rect>`+"\n", esc(tooltip(s)))
		if s.Note != "" {
			noteRunes := int((float64(width) - margin - (x + w + 5)) / noteCharW)
			fmt.Fprintf(b, `<text class="note" x="%s" y="%s" font-size="%d" fill="%s">%s</text>`+"\n",
				num(x+w+5), num(baseline), noteFontSize, mutedColour, esc(truncate(s.Note, noteRunes)))
		}
		b.WriteString("</g>\n")
	}

	// Legend.
	b.WriteString(`<g class="legend">` + "\n")
	for _, it := range legend.items {
		fmt.Fprintf(b, `<rect class="swatch" x="%s" y="%s" width="%d" height="%d" rx="2" fill="%s"/>`+"\n",
			num(it.x), num(it.y), swatch, swatch, colour[it.service])
		fmt.Fprintf(b, `<text class="service" x="%s" y="%s" fill="%s">%s</text>`+"\n",
			num(it.x+swatch+6), num(it.y+swatch-2), textColour, esc(it.label))
	}
	b.WriteString("</g>\n</svg>\n")
}

type legendItem struct {
	service, label string
	x, y           float64 // top left of the swatch
}

type legendLayout struct {
	items  []legendItem
	bottom float64
}

// layoutLegend places one swatch and name per service, left to right,
// wrapping to a new line when the image width is reached.
func layoutLegend(services []string, top, width float64) legendLayout {
	const maxRunes = 40
	x, y := float64(margin), top
	var items []legendItem
	for _, s := range services {
		label := s
		if label == "" {
			label = "(no service)"
		}
		label = truncate(label, maxRunes)
		w := swatch + 6 + float64(runeLen(label))*labelCharW + 20
		if x > margin && x+w > width-margin {
			x = margin
			y += legendRowH
		}
		items = append(items, legendItem{service: s, label: label, x: x, y: y})
		x += w
	}
	return legendLayout{items: items, bottom: y + swatch + 2}
}

// niceStep returns the tick step, in nanoseconds, for an axis covering d
// nanoseconds with at most maxTicks steps: the smallest of 1, 2 or 5
// times a power of ten that is large enough.
func niceStep(d int64, maxTicks int) int64 {
	target := max((d+int64(maxTicks)-1)/int64(maxTicks), 1)
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= target {
				return m * p
			}
		}
	}
}

// tickLabel formats v nanoseconds in milliseconds, with at most as many
// decimals as the step needs and no trailing zeros.
func tickLabel(v, step int64) string {
	decimals := 6
	for s := step; s%10 == 0 && decimals > 0; s /= 10 {
		decimals--
	}
	ms := strconv.FormatInt(v/1e6, 10)
	if frac := strings.TrimRight(fmt.Sprintf("%06d", v%1e6)[:decimals], "0"); frac != "" {
		ms += "." + frac
	}
	return ms + " ms"
}

func tooltip(s Span) string {
	var t strings.Builder
	t.WriteString(s.Name)
	if s.Service != "" {
		t.WriteString(" (" + s.Service + ")")
	}
	t.WriteString(": " + s.End.Sub(s.Start).String())
	if s.Note != "" {
		t.WriteString(", " + s.Note)
	}
	return t.String()
}

// truncate shortens s to at most n runes, ending it with an ellipsis when
// it was cut.
func truncate(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// esc escapes s for use as XML text or a quoted attribute value.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writes to a strings.Builder never fail
	return b.String()
}

// num formats a coordinate with at most two decimals.
func num(f float64) string {
	s := strconv.FormatFloat(f, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
