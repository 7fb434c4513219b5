package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestAddedP99(t *testing.T) {
	base := make([]time.Duration, 1000)
	for i := range base {
		base[i] = time.Duration(i+1) * time.Millisecond
	}
	shifted := func(by time.Duration) []time.Duration {
		d := make([]time.Duration, len(base))
		for i, v := range base {
			d[i] = v + by
		}
		return d
	}
	for _, tc := range []struct {
		name string
		with []time.Duration
		want time.Duration
	}{
		{"same", shifted(0), 0},
		{"5 ms slower", shifted(5 * time.Millisecond), 5 * time.Millisecond},
		{"2 ms faster", shifted(-2 * time.Millisecond), -2 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diff, low, high := addedP99(tc.with, base, rand.New(rand.NewPCG(1, 2)))
			if diff != tc.want {
				t.Errorf("difference %s, want %s", diff, tc.want)
			}
			if low > diff || high < diff || low == high {
				t.Errorf("interval %s to %s does not surround %s", low, high, diff)
			}
		})
	}
	if d, l, h := addedP99(nil, base, rand.New(rand.NewPCG(1, 2))); l != d || h != d {
		t.Errorf("no samples: %s (%s to %s), want no interval", d, l, h)
	}
}
