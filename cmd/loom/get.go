package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
)

func init() {
	commands["get"] = command{"print resources as tables, YAML or JSON, or watch them (as kubectl get)", runGet}
}

// getOptions are the flags of loom get.
type getOptions struct {
	output         string // "", wide, json, yaml or name
	allNamespaces  bool
	selector       string
	fieldSelector  string
	watch          bool
	watchOnly      bool
	watchEvents    bool
	noHeaders      bool
	showLabels     bool
	ignoreNotFound bool
	managedFields  bool
	chunkSize      int64
	raw            string
}

// human reports whether the output is a table.
func (o *getOptions) human() bool { return o.output == "" || o.output == "wide" }

// target is one thing to get: a resource's objects, or one object by name.
type target struct {
	mapping discovery.Mapping
	name    string
}

// getter fetches and prints targets.
type getter struct {
	rc        *rest.Client
	opts      getOptions
	namespace string
}

// runGet prints resources as kubectl get does: loom get RESOURCE [NAME...]
// (or RESOURCE/NAME...) with server-side tables, or as YAML, JSON or names,
// optionally watching; loom get --raw PATH prints the server's bytes.
func runGet(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom get", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	var o getOptions
	fs.StringVar(&o.output, "o", "", "output format: wide, yaml, json or name (default: a table)")
	fs.StringVar(&o.output, "output", "", "same as -o")
	fs.BoolVar(&o.allNamespaces, "A", false, "list across all namespaces")
	fs.BoolVar(&o.allNamespaces, "all-namespaces", false, "same as -A")
	fs.StringVar(&o.selector, "l", "", "label selector (e.g. app=web,tier!=db)")
	fs.StringVar(&o.selector, "selector", "", "same as -l")
	fs.StringVar(&o.fieldSelector, "field-selector", "", "field selector (e.g. status.phase=Running)")
	fs.BoolVar(&o.watch, "w", false, "after printing, watch for changes")
	fs.BoolVar(&o.watch, "watch", false, "same as -w")
	fs.BoolVar(&o.watchOnly, "watch-only", false, "watch for changes without printing the current state first")
	fs.BoolVar(&o.watchEvents, "output-watch-events", false, "with -w: print each change's type (ADDED, MODIFIED, DELETED)")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "do not print table headers")
	fs.BoolVar(&o.showLabels, "show-labels", false, "add a LABELS column")
	fs.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "a missing object is not an error")
	fs.BoolVar(&o.managedFields, "show-managed-fields", false, "with -o json or yaml: keep metadata.managedFields")
	fs.Int64Var(&o.chunkSize, "chunk-size", 500, "list in pages of this many objects (0: all at once)")
	fs.StringVar(&o.raw, "raw", "", "GET this path (e.g. /apis/batch/v1) and print the response as it is")
	pos, err := parse(fs, splitShortFlags(fs, args))
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(out, "Usage: loom get RESOURCE[,RESOURCE...] [NAME...] | RESOURCE/NAME... [flags]\n       loom get --raw PATH\n\n%s", flagUsage(fs))
		return err
	}
	if err != nil {
		return err
	}
	if err := o.validate(pos); err != nil {
		return err
	}
	rc, cfg, err := conn.client()
	if err != nil {
		return err
	}
	defer rc.CloseIdleConnections()
	if o.raw != "" {
		return getRaw(ctx, rc, o.raw, out)
	}
	mapper := discovery.NewMapper(discovery.NewCached(discovery.New(rc, discovery.Options{}), discovery.CacheOptions{}), discovery.MapperOptions{})
	targets, single, err := resolve(ctx, mapper, pos)
	if err != nil {
		return err
	}
	if o.allNamespaces && targets[0].name != "" {
		return fmt.Errorf("%w: a resource cannot be retrieved by name across all namespaces", errUsage)
	}
	g := &getter{rc: rc, opts: o, namespace: cfg.Namespace}
	switch {
	case o.watch || o.watchOnly:
		if len(targets) != 1 {
			return fmt.Errorf("%w: watch is only supported on one resource type, or one object", errUsage)
		}
		return g.watch(ctx, targets[0], out)
	case o.human():
		return g.printTables(ctx, targets, out, errOut)
	default:
		return g.printObjects(ctx, targets, single, out, errOut)
	}
}

func (o *getOptions) validate(pos []string) error {
	switch o.output {
	case "", "wide", "json", "yaml", "name":
	default:
		return fmt.Errorf("%w: -o %s: want wide, yaml, json or name", errUsage, o.output)
	}
	if o.raw != "" {
		if len(pos) > 0 {
			return fmt.Errorf("%w: arguments may not be passed when --raw is specified", errUsage)
		}
		if o.watch || o.watchOnly || o.selector != "" || o.fieldSelector != "" || o.output != "" {
			return fmt.Errorf("%w: --raw may not be specified with other flags that filter the server request or alter the output", errUsage)
		}
		if _, err := url.ParseRequestURI(o.raw); err != nil {
			return fmt.Errorf("%w: --raw must be a valid URL path: %v", errUsage, err)
		}
		return nil
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: you must specify the type of resource to get (see loom api-resources)", errUsage)
	}
	if o.showLabels && !o.human() {
		return fmt.Errorf("%w: --show-labels option cannot be used with %s printer", errUsage, o.output)
	}
	if o.watchEvents && !o.watch && !o.watchOnly {
		return fmt.Errorf("%w: --output-watch-events option can only be used with --watch or --watch-only", errUsage)
	}
	return nil
}

// splitShortFlags turns "-owide" into "-o" "wide" (and likewise for any
// one-letter flag that takes a value), as kubectl users type it.
func splitShortFlags(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && !strings.Contains(a, "=") && fs.Lookup(a[1:]) == nil {
			if f := fs.Lookup(a[1:2]); f != nil && !isBoolFlag(f) {
				out = append(out, a[:2], a[2:])
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// resolve turns the arguments into targets, as kubectl: "TYPE[,TYPE...]
// [NAME...]" or "TYPE/NAME...". A type is any name kubectl accepts (plural,
// singular, short name, kind, resource.group) or a category such as "all".
// single reports that exactly one object was named.
func resolve(ctx context.Context, m *discovery.Mapper, args []string) (targets []target, single bool, err error) {
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			typ, name, ok := cutSlash(a)
			if !ok || strings.Contains(name, "/") {
				return nil, false, fmt.Errorf("%w: arguments in resource/name form must have a single resource and name, got %q", errUsage, a)
			}
			ms, err := mappings(ctx, m, typ)
			if err != nil {
				return nil, false, err
			}
			for _, mp := range ms {
				targets = append(targets, target{mapping: mp, name: name})
			}
		}
		return targets, len(args) == 1, nil
	}
	for _, a := range args[1:] {
		if strings.Contains(a, "/") {
			return nil, false, fmt.Errorf("%w: there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'loom get resource/<resource_name>' instead of 'loom get resource resource/<resource_name>')", errUsage)
		}
	}
	types := strings.Split(args[0], ",")
	for _, typ := range types {
		if typ == "" {
			continue
		}
		ms, err := mappings(ctx, m, typ)
		if err != nil {
			return nil, false, err
		}
		for _, mp := range ms {
			if len(args) == 1 {
				targets = append(targets, target{mapping: mp})
			}
			for _, name := range args[1:] {
				targets = append(targets, target{mapping: mp, name: name})
			}
		}
	}
	if len(targets) == 0 {
		return nil, false, fmt.Errorf("%w: no resource type in %q", errUsage, args[0])
	}
	return targets, len(args) == 2 && len(targets) == 1, nil
}

// mappings resolves one resource name, or a category.
func mappings(ctx context.Context, m *discovery.Mapper, name string) ([]discovery.Mapping, error) {
	mp, err := m.ResourceFor(ctx, name)
	if err == nil {
		return []discovery.Mapping{mp}, nil
	}
	if !meta.IsNoMatchError(err) {
		return nil, err
	}
	if !strings.Contains(name, ".") {
		if ms, err := m.Category(ctx, strings.ToLower(name)); err == nil {
			return ms, nil
		}
	}
	return nil, fmt.Errorf("the server doesn't have a resource type %q", name)
}

// request starts a GET for t (a list when t has no name).
func (g *getter) request(t target) *rest.Request {
	res := t.mapping.Resource
	r := g.rc.Get().Group(res.Group).Version(res.Version).Resource(res.Resource)
	if t.mapping.Namespaced && !g.opts.allNamespaces {
		r.Namespace(g.namespace)
	}
	if t.name != "" {
		r.Name(t.name)
	}
	return r
}

// fetch gets t, as tables or as objects, calling each with every response:
// the object, or each page of the list.
func (g *getter) fetch(ctx context.Context, t target, asTable bool, each func(*unstructured.Unstructured) error) error {
	next := ""
	for {
		r := g.request(t)
		if asTable {
			r.Header("Accept", tableAccept)
		}
		if t.name == "" {
			r.Options(&metav1.ListOptions{LabelSelector: g.opts.selector, FieldSelector: g.opts.fieldSelector, Limit: g.opts.chunkSize, Continue: next})
		}
		u := &unstructured.Unstructured{}
		if err := r.Do(ctx, u); err != nil {
			return serverErr(err)
		}
		if err := each(u); err != nil {
			return err
		}
		if next = u.GetContinue(); t.name != "" || next == "" {
			return nil
		}
	}
}

// fetched is one response to print.
type fetched struct {
	target
	table *metav1.Table
}

// printTables prints targets as kubectl's tables: one table per resource
// type (each after a blank line), a NAMESPACE column with -A, names as
// kind/name when several kinds are printed, and "No resources found" on
// errOut when nothing was printed.
func (g *getter) printTables(ctx context.Context, targets []target, out, errOut io.Writer) error {
	var (
		got  []fetched
		errs []error
	)
	for _, t := range targets {
		err := g.fetch(ctx, t, true, func(u *unstructured.Unstructured) error {
			tab, err := tableFrom(u)
			if err == nil {
				got = append(got, fetched{t, tab})
			}
			return err
		})
		if err != nil && !(g.opts.ignoreNotFound && apierrors.IsNotFound(err)) {
			errs = append(errs, err)
		}
	}
	withKind := false
	for _, f := range got {
		withKind = withKind || f.mapping.Kind != got[0].mapping.Kind
	}

	counted := &countingWriter{w: out}
	sep := &separatingWriter{w: counted}
	tw := newTableWriter(sep)
	var (
		p             *tablePrinter
		last          *discovery.Mapping
		allNamespaced = !g.opts.allNamespaces
		withNamespace bool // once on, it stays on for later types, as in kubectl
	)
	for i := range got {
		f := &got[i]
		allNamespaced = allNamespaced && f.mapping.Namespaced
		if last == nil || last.Resource != f.mapping.Resource {
			if err := tw.Flush(); err != nil {
				return err
			}
			tw.forgetWidths()
			if last != nil && !g.opts.noHeaders && counted.n > 0 {
				sep.ready = true
			}
			withNamespace = withNamespace || g.opts.allNamespaces && f.mapping.Namespaced
			p = &tablePrinter{opts: g.printOptions(f.mapping, withNamespace, withKind)}
			last = &f.mapping
		}
		p.print(tw, f.table, "")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if counted.n == 0 && !g.opts.ignoreNotFound && len(errs) == 0 {
		if allNamespaced {
			fmt.Fprintf(errOut, "No resources found in %s namespace.\n", g.namespace)
		} else {
			fmt.Fprintln(errOut, "No resources found")
		}
	}
	return lastError(errs, errOut)
}

// lastError prints every error but the last on errOut, one line each as
// main prints the one returned, and returns the last: what was found is
// printed, and every miss is reported, as kubectl.
func lastError(errs []error, errOut io.Writer) error {
	if len(errs) == 0 {
		return nil
	}
	for _, err := range errs[:len(errs)-1] {
		fmt.Fprintln(errOut, "loom:", err)
	}
	return errs[len(errs)-1]
}

func (g *getter) printOptions(m discovery.Mapping, withNamespace, withKind bool) printOptions {
	return printOptions{
		noHeaders:     g.opts.noHeaders,
		wide:          g.opts.output == "wide",
		withNamespace: withNamespace,
		showLabels:    g.opts.showLabels,
		kind:          m.Kind.GroupKind(),
		withKind:      withKind,
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return c.w.Write(p)
}

// separatingWriter writes an empty line before the next non-empty write
// once ready, to separate tables.
type separatingWriter struct {
	w     io.Writer
	ready bool
}

func (s *separatingWriter) Write(p []byte) (int, error) {
	if len(p) > 0 && s.ready {
		s.ready = false
		if _, err := s.w.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
	}
	return s.w.Write(p)
}

// printObjects prints targets as YAML, JSON or names: the object itself
// when one object was named, otherwise a List of every object, as kubectl.
func (g *getter) printObjects(ctx context.Context, targets []target, single bool, out, errOut io.Writer) error {
	var (
		items []*unstructured.Unstructured
		errs  []error
	)
	for _, t := range targets {
		err := g.fetch(ctx, t, false, func(u *unstructured.Unstructured) error {
			items = append(items, listItems(u)...)
			return nil
		})
		if err != nil && !(g.opts.ignoreNotFound && apierrors.IsNotFound(err)) {
			if single {
				return err
			}
			errs = append(errs, err)
		}
	}
	p := &objectPrinter{format: g.opts.output, managedFields: g.opts.managedFields}
	if single && len(items) == 1 {
		if err := p.print(out, items[0], ""); err != nil {
			return err
		}
		return lastError(errs, errOut)
	}
	list := map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"metadata":   map[string]any{"resourceVersion": ""},
	}
	objs := make([]any, len(items))
	for i, it := range items {
		objs[i] = it.Object
	}
	list["items"] = objs
	if p.format == "name" {
		for _, it := range items {
			if err := p.print(out, it, ""); err != nil {
				return err
			}
		}
	} else if err := p.print(out, &unstructured.Unstructured{Object: list}, ""); err != nil {
		return err
	}
	return lastError(errs, errOut)
}

// listItems returns a list's items, with the apiVersion and kind the
// server leaves out of them, or u itself when it is not a list.
func listItems(u *unstructured.Unstructured) []*unstructured.Unstructured {
	if !u.IsList() {
		return []*unstructured.Unstructured{u}
	}
	raw, _ := u.Object["items"].([]any)
	items := make([]*unstructured.Unstructured, 0, len(raw))
	kind := strings.TrimSuffix(u.GetKind(), "List")
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		it := &unstructured.Unstructured{Object: m}
		if it.GetKind() == "" && it.GetAPIVersion() == "" {
			it.SetKind(kind)
			it.SetAPIVersion(u.GetAPIVersion())
		}
		items = append(items, it)
	}
	return items
}

// objectPrinter prints objects as kubectl's JSON, YAML and name printers.
type objectPrinter struct {
	format        string
	managedFields bool // keep metadata.managedFields
	count         int
}

// print writes obj; with event set (--output-watch-events) it writes a
// watch event around the object instead (names print alone). Unless told
// to keep them, it drops managedFields from obj and from a list's items,
// as kubectl (but not from watch events: kubectl keeps them there).
func (p *objectPrinter) print(w io.Writer, obj *unstructured.Unstructured, event watch.EventType) error {
	p.count++
	if !p.managedFields && event == "" {
		obj = obj.DeepCopy()
		if items, ok := obj.Object["items"].([]any); ok {
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					unstructured.RemoveNestedField(m, "metadata", "managedFields")
				}
			}
		} else {
			unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
		}
	}
	var data []byte
	var err error
	switch p.format {
	case "name":
		gk := obj.GroupVersionKind().GroupKind()
		if gk.Kind == "" {
			return fmt.Errorf("missing kind for resource with name %v", obj.GetName())
		}
		name := obj.GetName()
		if name == "" {
			name = "<unknown>"
		}
		kind := strings.ToLower(gk.Kind)
		if gk.Group != "" {
			kind += "." + gk.Group
		}
		_, err = fmt.Fprintf(w, "%s/%s\n", kind, name)
		return err
	case "json":
		if event != "" {
			data, err = json.Marshal(&metav1.WatchEvent{Type: string(event), Object: runtime.RawExtension{Object: obj}})
		} else {
			data, err = json.MarshalIndent(obj.Object, "", "    ")
		}
		data = append(data, '\n')
	case "yaml":
		if p.count > 1 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if event != "" {
			data, err = yaml.Marshal(&metav1.WatchEvent{Type: string(event), Object: runtime.RawExtension{Object: obj}})
		} else {
			data, err = yaml.Marshal(obj.Object)
		}
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// getRaw prints the server's response to GET path as it is.
func getRaw(ctx context.Context, rc *rest.Client, path string, out io.Writer) error {
	u, err := url.ParseRequestURI(path)
	if err != nil {
		return fmt.Errorf("%w: --raw must be a valid URL path: %v", errUsage, err)
	}
	r := rc.Get().AbsPath(u.Path)
	for k, vs := range u.Query() {
		for _, v := range vs {
			r.Param(k, v)
		}
	}
	body, err := r.Stream(ctx)
	if err != nil {
		return serverErr(err)
	}
	defer body.Close()
	if _, err := io.Copy(out, body); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// serverError shows the server's refusal by its message alone, as kubectl
// does (`pods "web" not found`); the *rest.StatusError stays reachable for
// apierrors.IsNotFound and the like.
type serverError struct{ err *rest.StatusError }

func (e *serverError) Error() string {
	if msg := e.err.ErrStatus.Message; msg != "" {
		return msg
	}
	return e.err.Error()
}

func (e *serverError) Unwrap() error { return e.err }

func serverErr(err error) error {
	var se *rest.StatusError
	if errors.As(err, &se) {
		return &serverError{se}
	}
	return err
}
