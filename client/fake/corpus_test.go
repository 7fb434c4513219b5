package fake_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/loom-k8s/loom/client/fake"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

var (
	rewrite  = flag.Bool("rewrite", false, "rewrite the corpus scripts' expected outputs with what kube-apiserver answers")
	fakeOnly = flag.Bool("fake-only", false, "run the corpus scripts against the fake only, not against kube-apiserver too")
)

var shared = testenv.Shared{Options: testenv.Options{CRDs: []string{"testdata/crds"}}}

func TestMain(m *testing.M) {
	flag.Parse()
	shared.Main(m)
}

// target is where a script runs: the fake or kube-apiserver.
type target struct {
	name    string
	rc      *rest.Client
	compact func(context.Context) error
}

func fakeTarget(t *testing.T) target {
	t.Helper()
	srv, err := fake.New(fake.Options{CRDs: []string{"testdata/crds"}})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := srv.REST(rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return target{name: "fake", rc: rc, compact: func(context.Context) error { srv.Compact(); return nil }}
}

// realTarget returns kube-apiserver, or false when its binaries are not
// installed (or -fake-only or -short was given).
func realTarget(t *testing.T) (target, bool) {
	t.Helper()
	if *fakeOnly || testing.Short() {
		return target{}, false
	}
	if _, err := os.Stat(filepath.Join(testenv.AssetsDir(), "kube-apiserver")); err != nil {
		return target{}, false
	}
	env := shared.Env(t)
	rc, err := env.REST(rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return target{name: "kube-apiserver", rc: rc, compact: func(ctx context.Context) error {
		if err := env.CompactEtcd(ctx, 0); err != nil {
			return err
		}
		// The watch cache of kube-apiserver keeps history of its own:
		// restarting it starts the cache after the compaction.
		return env.RestartAPIServer(ctx)
	}}, true
}

// TestCorpus runs the scripts of testdata/corpus against the fake and
// against kube-apiserver, and requires both to give the expected outputs,
// which are what kube-apiserver answered (normalised: see normalizer).
//
// A script is blocks separated by blank lines, each a command, a line
// "----" and the expected output, with comment lines starting with '#'
// between blocks. Each script runs in a namespace of its own (created
// first), which $NS names. Commands:
//
//	get PATH [| FIELD...]          GET; FIELDs pick dotted paths of the answer
//	getmeta PATH [| FIELD...]      GET as PartialObjectMetadata(List)
//	create PATH BODY [| FIELD...]  POST
//	update PATH BODY [| FIELD...]  PUT
//	patch TYPE PATH BODY [| ...]   PATCH, TYPE json, merge, strategic or apply
//	delete PATH [BODY] [| ...]     DELETE, BODY DeleteOptions
//	watch PATH N                   watch, read N events (the query has watch=1)
//	let VAR                        $VAR is now the last answer's resourceVersion
//	compact                        compact the history (etcd's, for the real server)
//
// PATH is an API path after "/api/" or "/apis/"; a leading "ns:" puts it
// in the script's namespace ("ns:v1/configmaps" is
// /api/v1/namespaces/$NS/configmaps). $NAME is the last answer's
// metadata.name, $RV its resourceVersion and $CONTINUE its continue
// token. BODY is JSON on one line.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/corpus")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(name, func(t *testing.T) {
			blocks := parseScript(t, file)
			ns := "corpus-" + strings.ReplaceAll(name, "_", "-")
			got := runScript(t, fakeTarget(t), ns, blocks)
			real, ok := realTarget(t)
			if ok {
				want := runScript(t, real, ns+"-"+fmt.Sprint(time.Now().UnixNano()%100000), blocks)
				if *rewrite {
					writeScript(t, file, blocks, want)
				} else {
					compare(t, file, "kube-apiserver", blocks, want)
				}
				for i := range blocks {
					blocks[i].want = want[i]
				}
			} else if *rewrite {
				t.Fatal("-rewrite needs kube-apiserver (testenv's binaries; see loom assets)")
			}
			compare(t, file, "the fake", blocks, got)
		})
	}
}

type block struct {
	line     int
	cmd      string
	want     string
	comments []string
}

func parseScript(t *testing.T, file string) []block {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, 1<<20)
	var blocks []block
	var comments []string
	n := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		n++
		return sc.Text(), true
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		switch {
		case strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "#"):
			comments = append(comments, line)
			continue
		}
		b := block{line: n, cmd: strings.TrimSpace(line), comments: comments}
		comments = nil
		if sep, ok := next(); !ok || sep != "----" {
			t.Fatalf("%s:%d: want ---- after the command", file, b.line)
		}
		var out []string
		for {
			l, ok := next()
			if !ok || strings.TrimSpace(l) == "" {
				break
			}
			out = append(out, l)
		}
		b.want = strings.Join(out, "\n")
		blocks = append(blocks, b)
	}
	return blocks
}

func writeScript(t *testing.T, file string, blocks []block, outs []string) {
	t.Helper()
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n")
		}
		for _, c := range b.comments {
			sb.WriteString(c + "\n")
		}
		sb.WriteString(b.cmd + "\n----\n")
		if outs[i] != "" {
			sb.WriteString(outs[i] + "\n")
		}
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func compare(t *testing.T, file, who string, blocks []block, got []string) {
	t.Helper()
	for i, b := range blocks {
		if got[i] != b.want {
			t.Errorf("%s:%d: %s: %s\n--- got\n%s\n--- want\n%s", file, b.line, who, b.cmd, got[i], b.want)
		}
	}
}

// runScript runs the blocks and returns each one's output.
func runScript(t *testing.T, tg target, ns string, blocks []block) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := tg.rc.Post().AbsPath("/api/v1/namespaces").Body([]byte(`{"metadata":{"name":"` + ns + `"}}`)).DoRaw(ctx); err != nil {
		t.Fatalf("%s: namespace: %v", tg.name, err)
	}
	norm := newNormalizer(ns)
	vars := map[string]string{"NS": ns}
	var outs []string
	for _, b := range blocks {
		cmd := b.cmd
		var pick []string
		if i := strings.LastIndex(cmd, " | "); i >= 0 {
			pick = strings.Fields(cmd[i+3:])
			cmd = cmd[:i]
		}
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
		for _, k := range keys {
			cmd = strings.ReplaceAll(cmd, "$"+k, vars[k])
		}
		out, last := runCommand(ctx, t, tg, ns, cmd, norm, pick, vars)
		if last != nil {
			if md, ok := last["metadata"].(map[string]any); ok {
				if s, ok := md["name"].(string); ok {
					vars["NAME"] = s
				}
				if s, ok := md["resourceVersion"].(string); ok {
					vars["RV"] = s
				}
				if s, ok := md["continue"].(string); ok {
					vars["CONTINUE"] = s
				}
			}
		}
		outs = append(outs, out)
	}
	return outs
}

func apiPath(ns, p string) string {
	if tail, ok := strings.CutPrefix(p, "ns:"); ok {
		gv, res, _ := cutGV(tail)
		return prefix(gv) + "/namespaces/" + ns + "/" + res
	}
	gv, res, _ := cutGV(p)
	if res == "" {
		return prefix(gv)
	}
	return prefix(gv) + "/" + res
}

// cutGV splits "v1/configmaps/x" or "apps/v1/deployments/x".
func cutGV(p string) (gv, tail string, ok bool) {
	parts := strings.SplitN(p, "/", 3)
	if parts[0] == "v1" {
		return "v1", strings.Join(parts[1:], "/"), true
	}
	if len(parts) < 3 {
		return p, "", false
	}
	return parts[0] + "/" + parts[1], parts[2], true
}

func prefix(gv string) string {
	if gv == "v1" {
		return "/api/v1"
	}
	return "/apis/" + gv
}

var patchTypes = map[string]string{
	"json": "application/json-patch+json", "merge": "application/merge-patch+json",
	"strategic": "application/strategic-merge-patch+json", "apply": "application/apply-patch+yaml",
}

func runCommand(ctx context.Context, t *testing.T, tg target, ns, cmd string, norm *normalizer, pick []string, vars map[string]string) (string, map[string]any) {
	verb, args, _ := strings.Cut(cmd, " ")
	var method, ctype, p, body, accept string
	switch verb {
	case "compact":
		if err := tg.compact(ctx); err != nil {
			t.Fatalf("%s: compact: %v", tg.name, err)
		}
		return "ok", nil
	case "let":
		vars[strings.TrimSpace(args)] = vars["RV"]
		return "ok", nil
	case "watch":
		p, n, _ := strings.Cut(args, " ")
		return runWatch(ctx, t, tg, apiPath(ns, p), strings.TrimSpace(n), norm), nil
	case "get":
		method, p = http.MethodGet, args
	case "getmeta":
		method, p = http.MethodGet, args
		accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
		if strings.Count(strings.SplitN(apiPath(ns, p), "?", 2)[0], "/")%2 == 1 {
			accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
		}
	case "create", "update", "delete":
		method = map[string]string{"create": http.MethodPost, "update": http.MethodPut, "delete": http.MethodDelete}[verb]
		p, body, _ = strings.Cut(args, " ")
	case "patch":
		var typ string
		typ, args, _ = strings.Cut(args, " ")
		method, ctype = http.MethodPatch, patchTypes[typ]
		p, body, _ = strings.Cut(args, " ")
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	var req *rest.Request
	if method == http.MethodPatch {
		req = tg.rc.Patch(ctype)
	} else {
		req = tg.rc.Verb(method)
	}
	path, query, _ := strings.Cut(apiPath(ns, p), "?")
	req = req.AbsPath(path)
	for _, kv := range strings.Split(query, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			v, _ = url.QueryUnescape(v)
			req = req.Param(k, v)
		}
	}
	if body = strings.TrimSpace(body); body != "" {
		req = req.Body([]byte(body))
	}
	if accept != "" {
		req = req.Header("Accept", accept)
	}
	res, err := req.DoRaw(ctx)
	var code int
	var data []byte
	if err != nil {
		se, ok := err.(*rest.StatusError)
		if !ok {
			return "error: " + err.Error(), nil
		}
		code = se.Code
		st := se.ErrStatus
		st.Kind, st.APIVersion = "Status", "v1"
		data, _ = json.Marshal(st)
	} else {
		code, data = res.StatusCode, res.Body
	}
	var obj, raw map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Sprintf("%d\n%s", code, data), nil
	}
	json.Unmarshal(data, &raw)
	return fmt.Sprintf("%d\n%s", code, norm.render(obj, pick)), raw
}

func runWatch(ctx context.Context, t *testing.T, tg target, p, n string, norm *normalizer) string {
	var want int
	fmt.Sscan(n, &want)
	path, query, _ := strings.Cut(p, "?")
	req := tg.rc.Get().AbsPath(path).Param("watch", "1")
	for _, kv := range strings.Split(query, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			v, _ = url.QueryUnescape(v)
			req = req.Param(k, v)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := req.Stream(wctx)
	if err != nil {
		if se, ok := err.(*rest.StatusError); ok {
			st := se.ErrStatus
			st.Kind, st.APIVersion = "Status", "v1"
			data, _ := json.Marshal(st)
			var obj map[string]any
			json.Unmarshal(data, &obj)
			return fmt.Sprintf("ERROR %d\n%s", se.Code, norm.render(obj, nil))
		}
		return "error: " + err.Error()
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	var lines []string
	for i := 0; i < want; i++ {
		var ev struct {
			Type   string         `json:"type"`
			Object map[string]any `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if err == io.EOF {
				lines = append(lines, "(end)")
			} else {
				lines = append(lines, "(no more events)")
			}
			break
		}
		if ev.Type == "ERROR" {
			lines = append(lines, fmt.Sprintf("ERROR %v\n%s", ev.Object["code"], norm.render(ev.Object, nil)))
			continue
		}
		if ev.Type == "BOOKMARK" {
			// A bookmark's resourceVersion may be any that the server
			// reached, moved on by writes of its own.
			if md, ok := ev.Object["metadata"].(map[string]any); ok {
				md["resourceVersion"] = "<bookmark-rv>"
			}
		}
		lines = append(lines, ev.Type+"\n"+norm.render(ev.Object, nil))
	}
	return strings.Join(lines, "\n")
}

// normalizer replaces what differs between runs (uids, timestamps,
// resourceVersions, the random part of generated names, the namespace)
// with placeholders; a value that repeats keeps its placeholder. It
// also lists each of a Status's causes once, and sorts discovery's
// resource lists by name.
type normalizer struct {
	ns   string
	uids map[string]string
	rvs  map[string]string
}

func newNormalizer(ns string) *normalizer {
	return &normalizer{ns: ns, uids: map[string]string{}, rvs: map[string]string{}}
}

var (
	digitsRE = regexp.MustCompile(`\b\d+\b`)
	uidRE    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

func (n *normalizer) placeholder(m map[string]string, v, prefix string) string {
	if p, ok := m[v]; ok {
		return p
	}
	p := fmt.Sprintf("<%s-%d>", prefix, len(m)+1)
	m[v] = p
	return p
}

func (n *normalizer) render(obj map[string]any, pick []string) string {
	n.walk(obj, "")
	if obj["kind"] == "APIResourceList" {
		// kube-apiserver lists the resources of CRDs in no fixed order.
		if rs, ok := obj["resources"].([]any); ok {
			sort.SliceStable(rs, func(i, j int) bool {
				a, _ := rs[i].(map[string]any)
				b, _ := rs[j].(map[string]any)
				return fmt.Sprint(a["name"]) < fmt.Sprint(b["name"])
			})
		}
	}
	if kind, _ := obj["kind"].(string); strings.HasSuffix(kind, "List") {
		if md, ok := obj["metadata"].(map[string]any); ok {
			if _, ok := md["resourceVersion"]; ok {
				md["resourceVersion"] = "<list-rv>"
			}
			if _, ok := md["continue"]; ok {
				md["continue"] = "<continue>"
			}
		}
	}
	var v any = obj
	if len(pick) > 0 {
		out := map[string]any{}
		for _, p := range pick {
			var cur any = obj
			for _, part := range strings.Split(p, ".") {
				m, _ := cur.(map[string]any)
				cur = m[part]
			}
			out[p] = cur
		}
		v = out
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return strings.TrimRight(string(data), "\n")
}

func (n *normalizer) walk(v any, key string) any {
	switch v := v.(type) {
	case map[string]any:
		if causes, ok := v["causes"].([]any); ok && key == "details" {
			// kube-apiserver may list one validation error more than
			// once (it validates metadata in more than one place).
			var uniq []any
			seen := map[string]bool{}
			for _, c := range causes {
				b, _ := json.Marshal(c)
				if !seen[string(b)] {
					seen[string(b)] = true
					uniq = append(uniq, c)
				}
			}
			v["causes"] = uniq
		}
		if md, ok := v["metadata"].(map[string]any); ok {
			if gn, _ := md["generateName"].(string); gn != "" {
				if name, _ := md["name"].(string); strings.HasPrefix(name, gn) {
					md["name"] = gn + "<random>"
				}
			}
		}
		for k, x := range v {
			v[k] = n.walk(x, k)
		}
		return v
	case []any:
		for i := range v {
			v[i] = n.walk(v[i], key)
		}
		return v
	case string:
		if n.ns != "" {
			v = strings.ReplaceAll(v, n.ns, "$NS")
		}
		switch key {
		case "uid":
			return n.placeholder(n.uids, v, "uid")
		case "resourceVersion":
			return n.placeholder(n.rvs, v, "rv")
		case "creationTimestamp", "deletionTimestamp", "time", "lastTransitionTime":
			return "<time>"
		case "message":
			v = uidRE.ReplaceAllString(v, "<uid>")
			return digitsRE.ReplaceAllString(v, "N")
		}
		return v
	}
	return v
}
