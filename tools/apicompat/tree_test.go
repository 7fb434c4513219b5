package main

import (
	"strings"
	"testing"
)

// TestCurrentTree runs the check as make api-check does: the repository's
// current tree against the newest recorded baseline and CHANGELOG.md. It
// fails on an incompatible change that the CHANGELOG's Unreleased section
// does not name.
func TestCurrentTree(t *testing.T) {
	if testing.Short() {
		t.Skip("loads every package of the core module")
	}
	var out strings.Builder
	err := run(t.Context(), options{}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "incompatible (all named in CHANGELOG Unreleased)") {
		t.Errorf("no summary line in the output")
	}
}
