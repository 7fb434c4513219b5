// Package tracesvg draws one distributed trace as a self-contained SVG
// timeline, for use as a picture in documentation.
//
// # Picture
//
// [Render] draws one row per span. Rows are in tree order: a depth-first
// walk in which each span is followed by its children, sorted by start
// time (roots are sorted the same way). The span name is written in a
// label column on the left, indented by its depth and cut short with an
// ellipsis when it does not fit. To its right a bar runs from the span's
// start to its end on a time axis shared by all rows, whose ticks are
// labelled in milliseconds at steps of 1, 2 or 5 times a power of ten. A
// span of zero duration still gets a thin visible bar. The optional note
// of a span is written just after its bar. Bars are coloured by service,
// from a fixed palette assigned in the order the services first appear
// in the rows, and a legend under the rows names the services.
//
// # Input
//
// A span whose Parent is empty, or names no span of the input, is a root.
// So is every span on a cycle of Parent links (including a span that is
// its own parent), so malformed input still draws every span exactly
// once. When several spans share an ID, children attach to the first of
// them. Render rejects an empty input and a span that ends before it
// starts.
//
// The output is deterministic for a given input, uses no scripts,
// external fonts or images, and escapes all text, so any names are safe
// to draw.
package tracesvg
