package intern

import "testing"

func TestSizer(t *testing.T) {
	tests := []struct {
		name    string
		learn   [][2]int // n, kept
		n       int
		min     int // the guess must cover at least this
		max     int // and waste no more than this
		nothing bool
	}{
		{name: "nothing learnt", n: 1000, nothing: true},
		{name: "one object", learn: [][2]int{{1000, 200}}, n: 1000, min: 200, max: 260},
		{name: "scales with the rest", learn: [][2]int{{1000, 200}}, n: 500, min: 100, max: 150},
		{name: "a steady kind", learn: [][2]int{{800, 100}, {820, 102}, {790, 99}, {800, 100}}, n: 800, min: 100, max: 150},
		{name: "follows a change", learn: append(repeat([2]int{1000, 500}, 2), repeat([2]int{1000, 100}, 60)...), n: 1000, min: 100, max: 150},
		{name: "kept everything", learn: [][2]int{{100, 100}}, n: 100, min: 100, max: 150},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Sizer
			for _, l := range tc.learn {
				s.Learn(l[0], l[1])
			}
			g := s.Guess(tc.n)
			if tc.nothing {
				if g != 0 {
					t.Fatalf("Guess(%d) = %d with nothing learnt, want 0", tc.n, g)
				}
				return
			}
			if g < tc.min || g > tc.max {
				t.Fatalf("Guess(%d) = %d, want %d to %d", tc.n, g, tc.min, tc.max)
			}
		})
	}
	var nilSizer *Sizer
	nilSizer.Learn(100, 10)
	if g := nilSizer.Guess(100); g != 0 {
		t.Fatalf("a nil Sizer guessed %d", g)
	}
}

func repeat(v [2]int, n int) [][2]int {
	out := make([][2]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}
