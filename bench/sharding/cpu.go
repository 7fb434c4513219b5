package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// cpuSeconds is the user and system CPU time a process has used, from
// /proc/PID/stat (Linux); -1 if it cannot be read.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return -1
	}
	// Fields 14 and 15 (utime, stime) are f[11] and f[12] here.
	u, err1 := strconv.ParseFloat(f[11], 64)
	k, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (u + k) / 100 // USER_HZ is 100 on Linux
}

// cpuSnapshot reads the CPU time of the control plane's servers, of each
// live replica and of the driver itself.
func (r *run) cpuSnapshot() map[string]float64 {
	m := map[string]float64{"driver": cpuSeconds(os.Getpid())}
	for name, pid := range r.env.Processes() {
		m[name] = cpuSeconds(pid)
	}
	for id, p := range r.procs {
		m[id] = cpuSeconds(p.cmd.Process.Pid)
	}
	return m
}

// cpuLine says how much CPU each process used between two snapshots,
// over wall time d. A replica that exited before the second snapshot is
// left out; one started after the first counts from zero.
func cpuLine(before, after map[string]float64, d time.Duration) string {
	var parts []string
	total := 0.0
	for _, name := range slices.Sorted(maps.Keys(after)) {
		a := after[name]
		if a < 0 {
			continue
		}
		used := a - max(before[name], 0)
		total += used
		parts = append(parts, fmt.Sprintf("%s %.1f", name, used))
	}
	return fmt.Sprintf("cpu s over %.1f s: %s; all %.1f (%.2f cores)", d.Seconds(), strings.Join(parts, ", "), total, total/d.Seconds())
}

// profileAPIServer writes a CPU profile of kube-apiserver, taken over
// the next d, to dir/name.pprof. The server must run with
// --profiling=true.
func (r *run) profileAPIServer(ctx context.Context, dir, name string, d time.Duration) error {
	u := strings.TrimSuffix(r.host, "/") + "/debug/pprof/profile?seconds=" + strconv.Itoa(int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("kube-apiserver profile: %s: %s", resp.Status, b)
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// requestCounts reads kube-apiserver's apiserver_request_total, summed
// by verb and resource ("PATCH configmaps"), and the objects it sent, by
// resource ("sent shelves"): the items of lists (served from its watch
// cache or from etcd) and the events of watches, the initial events of a
// streaming list included.
func (r *run) requestCounts(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(r.host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kube-apiserver metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver metrics: %w", err)
	}
	m := map[string]float64{}
	if f := families["apiserver_request_total"]; f != nil {
		for _, metric := range f.GetMetric() {
			var verb, resource string
			for _, l := range metric.GetLabel() {
				switch l.GetName() {
				case "verb":
					verb = l.GetValue()
				case "resource":
					resource = l.GetValue()
				}
			}
			m[verb+" "+resource] += metric.GetCounter().GetValue()
		}
	}
	for _, name := range []string{"apiserver_watch_events_total", "apiserver_cache_list_returned_objects_total", "apiserver_storage_list_returned_objects_total"} {
		f := families[name]
		if f == nil {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "resource" {
					m[sentPrefix+l.GetValue()] += metric.GetCounter().GetValue()
				}
			}
		}
	}
	return m, nil
}

// requestLine lists the requests kube-apiserver served between two
// readings, most first, per second of d.
func requestLine(before, after map[string]float64, d time.Duration) string {
	type kv struct {
		k string
		n float64
	}
	var all []kv
	total := 0.0
	for k, a := range after {
		if strings.HasPrefix(k, sentPrefix) {
			continue
		}
		if n := a - before[k]; n > 0 {
			all = append(all, kv{k, n})
			total += n
		}
	}
	slices.SortFunc(all, func(a, b kv) int { return int(b.n - a.n) })
	var parts []string
	for _, e := range all[:min(len(all), 8)] {
		parts = append(parts, fmt.Sprintf("%s %.0f", e.k, e.n))
	}
	return fmt.Sprintf("requests: %.0f (%.0f/s): %s", total, total/d.Seconds(), strings.Join(parts, ", "))
}

// sentPrefix marks, in requestCounts, the objects sent of a resource.
const sentPrefix = "sent "

// sentObjects returns how many Shelves and ConfigMaps kube-apiserver sent
// between two readings of requestCounts.
func sentObjects(before, after map[string]float64) (shelves, configMaps int) {
	d := func(res string) int { return int(after[sentPrefix+res] - before[sentPrefix+res]) }
	return d(shelfRes.Resource.Resource), d("configmaps")
}
