package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

var metrics = []string{"sync_ms", "heap_MB", "reqs_per_reconcile", "p50_ms", "p99_ms", "max_ms", "missed"}

// summary prints, per implementation and metric, the median and range of
// the raw result lines in path, then Loom's ratio to each peer's median.
func summary(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	vals := map[string]map[string][]float64{} // impl → metric → values
	var impls []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kv := map[string]string{}
		for _, field := range strings.Fields(sc.Text()) {
			if k, v, ok := strings.Cut(field, "="); ok {
				kv[k] = v
			}
		}
		impl := kv["impl"]
		if impl == "" {
			continue
		}
		if vals[impl] == nil {
			vals[impl] = map[string][]float64{}
			impls = append(impls, impl)
		}
		for _, m := range metrics {
			if v, err := strconv.ParseFloat(kv[m], 64); err == nil {
				vals[impl][m] = append(vals[impl][m], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		if len(s) == 0 {
			return 0
		}
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	for _, m := range metrics {
		fmt.Fprintf(w, "%-20s", m)
		for _, impl := range impls {
			v := vals[impl][m]
			fmt.Fprintf(w, "  %s %.3g [%.3g-%.3g] n=%d", impl, median(v), slices.Min(append([]float64{}, v...)), slices.Max(append([]float64{}, v...)), len(v))
		}
		fmt.Fprintln(w)
	}
	for _, impl := range impls {
		if !strings.HasPrefix(impl, "loom") {
			continue
		}
		for _, peer := range impls {
			if strings.HasPrefix(peer, "loom") {
				continue
			}
			fmt.Fprintf(w, "%s/%s:", impl, peer)
			for _, m := range []string{"heap_MB", "sync_ms", "p99_ms"} {
				if p := median(vals[peer][m]); p > 0 {
					fmt.Fprintf(w, " %s %.3fx", m, median(vals[impl][m])/p)
				}
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}
