package main

import (
	"errors"
	"flag"
	"reflect"
	"testing"
)

func TestParseIntersperses(t *testing.T) {
	tests := []struct {
		args    []string
		wantPos []string
		wantN   string
		wantA   bool
		wantErr error
	}{
		{[]string{"pods"}, []string{"pods"}, "", false, nil},
		{[]string{"pods", "-n", "x"}, []string{"pods"}, "x", false, nil},
		{[]string{"-n", "x", "pods", "web", "-A"}, []string{"pods", "web"}, "x", true, nil},
		{[]string{"pods", "--", "-n", "x"}, []string{"pods", "-n", "x"}, "", false, nil},
		{[]string{"pods", "--bogus"}, nil, "", false, errUsage},
		{[]string{"-h"}, nil, "", false, flag.ErrHelp},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.String("n", "", "")
		a := fs.Bool("A", false, "")
		pos, err := parse(fs, tt.args)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%q: err %v, want %v", tt.args, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(pos, tt.wantPos) || *n != tt.wantN || *a != tt.wantA {
			t.Errorf("%q: pos %q n %q A %v; want %q %q %v", tt.args, pos, *n, *a, tt.wantPos, tt.wantN, tt.wantA)
		}
	}
}

func TestUnknownCommandIsUsageError(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"dev"}, {"dev", "sideways"}, {"dev", "up", "extra"}} {
		if err := run(t.Context(), args, nil, nil); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}
