// Command curve draws the scale curve of the informer benchmark's live
// mode: heap per Pod, sync CPU, sync wall time and the extra memory
// during the sync, for Loom and client-go, against the number of Pods.
// It reads raw result lines (bench/informer's output, one run per line)
// and writes an SVG, and prints the medians as a Markdown table.
//
//	go run ./informer/curve -o ../docs/scale-curve.svg informer/results/2026-12-06-scale-*.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// metric is one chart.
type metric struct {
	key, title, unit string
	scale            float64 // multiplies the raw value
}

var metrics = []metric{
	{"heap_per_pod_B", "heap per Pod", "KB", 1.0 / 1000},
	{"cpu_sync_ms", "sync CPU", "s", 1.0 / 1000},
	{"sync_ms", "sync wall time", "s", 1.0 / 1000},
	{"peak_sync_extra_MB", "extra memory during the sync", "MB", 1},
}

var impls = []string{"loom", "client-go"}

func main() {
	out := flag.String("o", "scale-curve.svg", "the SVG to write")
	flag.Parse()
	// values[impl][pods][metric] = runs
	values := map[string]map[int]map[string][]float64{}
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			log.Fatal(err)
		}
		if err := read(f, values); err != nil {
			log.Fatalf("%s: %v", name, err)
		}
		f.Close()
	}
	var sizes []int
	for n := range values["loom"] {
		if values["client-go"][n] != nil {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	if len(sizes) < 2 {
		log.Fatal("need runs of both libraries at two sizes at least")
	}
	med := func(impl string, n int, key string) float64 { return median(values[impl][n][key]) }

	// The table.
	fmt.Println("| Pods | " + strings.Join(func() []string {
		var h []string
		for _, m := range metrics {
			h = append(h, fmt.Sprintf("%s, Loom / client-go (%s) | ratio", m.title, m.unit))
		}
		return h
	}(), " | ") + " |")
	fmt.Println("|---" + strings.Repeat("|---|---", len(metrics)) + "|")
	for _, n := range sizes {
		row := []string{fmt.Sprintf("%d", n)}
		for _, m := range metrics {
			l, c := med("loom", n, m.key)*m.scale, med("client-go", n, m.key)*m.scale
			row = append(row, fmt.Sprintf("%s / %s", num(l), num(c)), fmt.Sprintf("%.3f×", l/c))
		}
		fmt.Println("| " + strings.Join(row, " | ") + " |")
	}

	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	if err := draw(f, sizes, med); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// read adds the runs of r's result lines to values.
func read(r io.Reader, values map[string]map[int]map[string][]float64) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "impl=") {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		n, err := strconv.Atoi(kv["pods"])
		if err != nil {
			return fmt.Errorf("no pods= in %q", line)
		}
		impl := kv["impl"]
		if values[impl] == nil {
			values[impl] = map[int]map[string][]float64{}
		}
		if values[impl][n] == nil {
			values[impl][n] = map[string][]float64{}
		}
		for _, m := range metrics {
			v, err := strconv.ParseFloat(kv[m.key], 64)
			if err != nil {
				return fmt.Errorf("no %s in %q", m.key, line)
			}
			values[impl][n][m.key] = append(values[impl][n][m.key], v)
		}
	}
	return sc.Err()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// draw writes the charts, two by two, with Pods on a log scale.
func draw(w io.Writer, sizes []int, med func(impl string, n int, key string) float64) error {
	const (
		cw, ch        = 360, 220 // one chart
		left, top     = 60, 40   // the plot inside a chart
		pw, ph        = 270, 140
		cols          = 2
		width, height = cw * cols, 30 + ch*2
	)
	colors := map[string]string{"loom": "#1f6feb", "client-go": "#d1242f"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="13">Pod informer sync against kube-apiserver, medians: Loom (blue), client-go (red)</text>`+"\n")
	lx := func(n int) float64 {
		lo, hi := math.Log10(float64(sizes[0])), math.Log10(float64(sizes[len(sizes)-1]))
		return left + (math.Log10(float64(n))-lo)/(hi-lo)*pw
	}
	for i, m := range metrics {
		ox, oy := (i%cols)*cw, 30+(i/cols)*ch
		maxV := 0.0
		for _, impl := range impls {
			for _, n := range sizes {
				maxV = math.Max(maxV, med(impl, n, m.key)*m.scale)
			}
		}
		maxV *= 1.1
		ly := func(v float64) float64 { return top + ph - v/maxV*ph }
		fmt.Fprintf(&b, `<g transform="translate(%d,%d)">`+"\n", ox, oy)
		fmt.Fprintf(&b, `<text x="%d" y="20" font-size="12">%s (%s)</text>`+"\n", left, m.title, m.unit)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`+"\n", left, top+ph, left+pw, top+ph)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`+"\n", left, top, left, top+ph)
		for _, frac := range []float64{0, 0.5, 1} {
			v := maxV / 1.1 * frac
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, ly(v)+4, num(v))
		}
		for _, n := range sizes {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", lx(n), top+ph+14, podsLabel(n))
		}
		for _, impl := range impls {
			var pts []string
			for _, n := range sizes {
				v := med(impl, n, m.key) * m.scale
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx(n), ly(v)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", lx(n), ly(v), colors[impl])
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", colors[impl], strings.Join(pts, " "))
		}
		fmt.Fprintf(&b, "</g>\n")
	}
	fmt.Fprintf(&b, `<text x="10" y="%d" fill="#555">Pods (log scale)</text>`+"\n", height-6)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func podsLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}
