package main

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
)

// This file prints server-side tables (metav1.Table) the way kubectl does:
// the same columns, cells, decorations and alignment, byte for byte.

// tableAccept asks the server for a Table, falling back to the object.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// tabWriter aligns tab-terminated cells into columns as kubectl's printers
// do (github.com/liggitt/tabwriter with minimum width 6, padding 3, padding
// character ' ' and RememberWidths). Text is buffered until Flush. Within a
// run of consecutive lines that all have a column, the column is as wide
// as its widest cell (in runes) plus 3, and at least 6; the text after a
// line's last tab is not padded. Widths are remembered across flushes and
// only grow, so rows printed one at a time by a watch stay aligned with the
// table above them.
type tabWriter struct {
	out      io.Writer
	buf      []byte
	remember bool  // false only in tests, to compare with text/tabwriter
	widths   []int // remembered width per column
}

func newTableWriter(out io.Writer) *tabWriter { return &tabWriter{out: out, remember: true} }

func (w *tabWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// forgetWidths drops the remembered widths, for a table with other columns.
func (w *tabWriter) forgetWidths() { w.widths = nil }

// Flush aligns and writes everything buffered.
func (w *tabWriter) Flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	var out bytes.Buffer
	// A form feed ends a line and every column, as a flush would.
	segs := bytes.Split(w.buf, []byte{'\f'})
	for i, seg := range segs {
		if i > 0 {
			out.WriteByte('\n')
		}
		w.format(&out, string(seg), i == len(segs)-1)
	}
	w.buf = w.buf[:0]
	_, err := w.out.Write(out.Bytes())
	return err
}

// format aligns one segment of text that no form feed interrupts. In the
// last one, text after the last newline is an unfinished line, which ends
// at its last non-empty cell.
func (w *tabWriter) format(out *bytes.Buffer, seg string, last bool) {
	lines := strings.Split(seg, "\n")
	cells := make([][]string, len(lines))
	ncols := 0
	for i, l := range lines {
		cells[i] = splitCells(l)
		if n := len(cells[i]); last && i == len(lines)-1 && n > 1 && cells[i][n-1] == "" {
			cells[i] = cells[i][:n-1]
		}
		ncols = max(ncols, len(cells[i])-1)
	}
	// width[i][j] is the padded width of cell j of line i.
	width := make([][]int, len(lines))
	for i := range width {
		width[i] = make([]int, max(len(cells[i])-1, 0))
	}
	for j := range ncols {
		for i := 0; i < len(lines); {
			if len(cells[i])-1 <= j {
				i++
				continue
			}
			// A block: the lines from i on that have a cell in column j.
			end, wd := i, 6
			for ; end < len(lines) && len(cells[end])-1 > j; end++ {
				wd = max(wd, utf8.RuneCountInString(cells[end][j])+3)
			}
			switch {
			case !w.remember:
			case j < len(w.widths):
				wd = max(wd, w.widths[j])
				w.widths[j] = wd
			default:
				w.widths = append(w.widths, wd)
			}
			for k := i; k < end; k++ {
				width[k][j] = wd
			}
			i = end
		}
	}
	for i, line := range cells {
		for j, c := range line {
			out.WriteString(c)
			if j < len(line)-1 {
				out.WriteString(strings.Repeat(" ", width[i][j]-utf8.RuneCountInString(c)))
			}
		}
		if i < len(lines)-1 {
			out.WriteByte('\n')
		}
	}
}

// splitCells splits a line at its tabs (horizontal or vertical).
func splitCells(l string) []string {
	var cells []string
	start := 0
	for i := 0; i < len(l); i++ {
		if l[i] == '\t' || l[i] == '\v' {
			cells = append(cells, l[start:i])
			start = i + 1
		}
	}
	return append(cells, l[start:])
}

// printOptions are kubectl's table print options that loom supports.
type printOptions struct {
	noHeaders     bool
	wide          bool
	withNamespace bool
	showLabels    bool
	kind          schema.GroupKind // with withKind, names print as kind/name
	withKind      bool
}

// tablePrinter prints server-side tables as kubectl's HumanReadablePrinter
// does. It remembers the last columns it printed, so that tables from later
// pages or watch events (which may come without column definitions) add
// rows under the same header.
type tablePrinter struct {
	opts           printOptions
	lastColumns    []metav1.TableColumnDefinition
	printedHeaders bool
}

// print writes t to w (a *tabWriter); event, when set, goes in a first
// EVENT column. It changes t.
func (p *tablePrinter) print(w io.Writer, t *metav1.Table, event watch.EventType) {
	opts := p.opts
	if p.printedHeaders && (len(t.ColumnDefinitions) == 0 || reflect.DeepEqual(t.ColumnDefinitions, p.lastColumns)) {
		opts.noHeaders = true
	}
	if len(t.ColumnDefinitions) == 0 {
		t.ColumnDefinitions = p.lastColumns
	} else if !reflect.DeepEqual(t.ColumnDefinitions, p.lastColumns) {
		p.lastColumns = t.ColumnDefinitions
		p.printedHeaders = false
	}
	if len(t.Rows) > 0 {
		p.printedHeaders = true
	}
	decorate(t, opts)
	if event != "" {
		t.ColumnDefinitions = append([]metav1.TableColumnDefinition{{Name: "Event", Type: "string"}}, t.ColumnDefinitions...)
		for i := range t.Rows {
			t.Rows[i].Cells = append([]any{eventName(event)}, t.Rows[i].Cells...)
		}
	}
	writeTable(w, t, opts)
}

// eventName pads event types to one width, as kubectl.
func eventName(e watch.EventType) string {
	switch e {
	case watch.Added:
		return "ADDED   "
	case watch.Modified:
		return "MODIFIED"
	case watch.Deleted:
		return "DELETED "
	case watch.Error:
		return "ERROR   "
	}
	return string(e)
}

// decorate adds the NAMESPACE column first and LABELS last, and prefixes
// names with their kind, as asked.
func decorate(t *metav1.Table, opts printOptions) {
	nameColumn := -1
	if opts.withKind && !opts.kind.Empty() {
		for i, c := range t.ColumnDefinitions {
			if c.Format == "name" && c.Type == "string" {
				nameColumn = i
				break
			}
		}
	}
	width := len(t.ColumnDefinitions)
	if opts.withNamespace {
		width++
		t.ColumnDefinitions = append([]metav1.TableColumnDefinition{{Name: "Namespace", Type: "string"}}, t.ColumnDefinitions...)
	}
	if opts.showLabels {
		width++
		t.ColumnDefinitions = append(t.ColumnDefinitions[:len(t.ColumnDefinitions):len(t.ColumnDefinitions)], metav1.TableColumnDefinition{Name: "Labels", Type: "string"})
	}
	if !opts.showLabels && !opts.withNamespace && nameColumn < 0 {
		return
	}
	for i := range t.Rows {
		row := &t.Rows[i]
		if nameColumn >= 0 && nameColumn < len(row.Cells) {
			row.Cells[nameColumn] = fmt.Sprintf("%s/%s", strings.ToLower(opts.kind.String()), row.Cells[nameColumn])
		}
		m, _ := row.Object.Object.(metav1.Object)
		if m == nil {
			// No metadata: empty cells where it would go.
			if opts.withNamespace {
				row.Cells = append([]any{nil}, row.Cells...)
			}
			for len(row.Cells) < width {
				row.Cells = append(row.Cells, nil)
			}
			continue
		}
		if opts.withNamespace {
			row.Cells = append([]any{m.GetNamespace()}, row.Cells...)
		}
		if opts.showLabels {
			row.Cells = append(row.Cells, labels.FormatLabels(m.GetLabels()))
		}
	}
}

// writeTable writes the header (unless told not to, or there are no rows)
// and the rows, leaving out columns of priority above 0 unless wide.
func writeTable(w io.Writer, t *metav1.Table, opts printOptions) {
	var b strings.Builder
	if !opts.noHeaders {
		if len(t.Rows) == 0 {
			return
		}
		first := true
		for _, c := range t.ColumnDefinitions {
			if !opts.wide && c.Priority != 0 {
				continue
			}
			if !first {
				b.WriteByte('\t')
			}
			first = false
			b.WriteString(strings.ToUpper(c.Name))
		}
		b.WriteByte('\n')
	}
	for _, row := range t.Rows {
		first := true
		for i, cell := range row.Cells {
			if i >= len(t.ColumnDefinitions) {
				break // more cells than columns: a bad table, as kubectl
			}
			if !opts.wide && t.ColumnDefinitions[i].Priority != 0 {
				continue
			}
			if !first {
				b.WriteByte('\t')
			}
			first = false
			b.WriteString(cellText(cell))
		}
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// cellText formats a cell as kubectl: nothing for null, strings cut at the
// first line break (with "..."), anything else with fmt; terminal escape
// characters made visible.
func cellText(cell any) string {
	switch v := cell.(type) {
	case nil:
		return ""
	case string:
		if i := strings.IndexAny(v, "\f\n\r"); i >= 0 {
			return escapeTerminal(v[:i]) + "..."
		}
		return escapeTerminal(v)
	default:
		return escapeTerminal(fmt.Sprint(v))
	}
}

var terminalEscaper = strings.NewReplacer("\x1b", "^[", "\r", "\\r")

func escapeTerminal(s string) string { return terminalEscaper.Replace(s) }

// tableFrom reads a Table from a server response decoded as unstructured,
// as kubectl does (numbers in cells are int64 or float64). Each row's object
// (metadata only, by default) becomes a *metav1.PartialObjectMetadata. A
// response that is not a Table (a server that cannot make one) gets
// kubectl's fallback columns, NAME and AGE.
func tableFrom(u *unstructured.Unstructured) (*metav1.Table, error) {
	gvk := u.GroupVersionKind()
	if gvk.Group != metav1.GroupName || gvk.Kind != "Table" || gvk.Version != "v1" && gvk.Version != "v1beta1" {
		return fallbackTable(u)
	}
	t := &metav1.Table{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
		return nil, fmt.Errorf("decoding the server's table: %w", err)
	}
	rows, _, _ := unstructured.NestedSlice(u.Object, "rows")
	for i := range t.Rows {
		if i >= len(rows) {
			break
		}
		r, _ := rows[i].(map[string]any)
		obj, _ := r["object"].(map[string]any)
		if obj == nil {
			continue
		}
		m := &metav1.PartialObjectMetadata{}
		if md, ok := obj["metadata"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &m.ObjectMeta); err != nil {
				return nil, fmt.Errorf("decoding the server's table: %w", err)
			}
		}
		t.Rows[i].Object = runtime.RawExtension{Object: m}
	}
	return t, nil
}

// fallbackTable prints an object or a list as NAME and AGE.
func fallbackTable(u *unstructured.Unstructured) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Age", Type: "string"},
	}}
	add := func(obj *unstructured.Unstructured) {
		age := "<unknown>"
		if ts := obj.GetCreationTimestamp(); !ts.IsZero() {
			age = duration.HumanDuration(time.Since(ts.Time))
		}
		m := &metav1.PartialObjectMetadata{}
		m.Namespace, m.Labels = obj.GetNamespace(), obj.GetLabels()
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{obj.GetName(), age}, Object: runtime.RawExtension{Object: m}})
	}
	if u.IsList() {
		err := u.EachListItem(func(o runtime.Object) error {
			add(o.(*unstructured.Unstructured))
			return nil
		})
		return t, err
	}
	add(u)
	return t, nil
}
