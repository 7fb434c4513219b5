package main

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/loom-k8s/loom/testenv"
)

// The project templates: scaffold/init for `loom init`, scaffold/api for
// `loom create api`, scaffold/webhook for `loom create webhook`. They are
// text/template files with [[ ]] as delimiters, so that Helm's and Go's own
// braces pass through untouched. A file's path under its folder is its
// path in the project, itself a template, with ".tmpl" removed.
//
//go:embed all:scaffold
var scaffoldFS embed.FS

func init() {
	commands["init"] = command{"start an operator project on Loom (as kubebuilder init)", runInit}
	commands["create"] = command{"add an API (types, controller, e2e test) or its webhooks to a project", runCreate}
}

// projectFile records what `loom init` was given, for `loom create`.
const projectFile = "PROJECT"

// project is what the templates see.
type project struct {
	Domain  string `json:"domain"`
	Repo    string `json:"repo"`
	Name    string `json:"projectName"`
	License string `json:"license"`

	Namespace      string `json:"-"` // where the operator runs: <name>-system
	LoomVersion    string `json:"-"`
	GoVersion      string `json:"-"`
	AssetsVersions string `json:"-"` // the cache folder name testenv looks in
	ToolsVersion   string `json:"-"` // controller-gen's
	Year           int    `json:"-"`

	// For create api and create webhook; not in PROJECT.
	Group      string `json:"-"`
	Version    string `json:"-"`
	Kind       string `json:"-"`
	Plural     string `json:"-"` // "memcacheds"
	Lower      string `json:"-"` // "memcached"
	FullGroup  string `json:"-"` // group.domain
	Namespaced bool   `json:"-"`
	// StorageVersion marks the kind's types with +kubebuilder:storageversion:
	// true for the first version of a kind, false when api/ already holds
	// the kind (same group) in another version, so that the CRD has one.
	StorageVersion bool `json:"-"`
}

// loomVersion is the version of the loom module this binary was built
// from, when a project can require it, else "".
func loomVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return requirableVersion(bi)
}

// requirableVersion is the version of the loom module in bi that a go.mod
// can require, or "" when there is none: a build from a checkout reports
// "(devel)" or, with -buildvcs (Go's default), a pseudo-version made up
// from the commit (vcs.* settings), and "+dirty" when the tree had
// changes; none of these is on the module proxy. A pseudo-version without
// vcs.* settings is what `go install ...@commit` records: that one is.
func requirableVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if bi.Main.Path != "github.com/loom-k8s/loom" || !strings.HasPrefix(v, "v") || strings.HasSuffix(v, "+dirty") {
		return ""
	}
	if pseudoVersion.MatchString(v) && slices.ContainsFunc(bi.Settings, func(s debug.BuildSetting) bool {
		return strings.HasPrefix(s.Key, "vcs.")
	}) {
		return ""
	}
	return v
}

// pseudoVersion matches Go's pseudo-versions (as golang.org/x/mod/module's
// IsPseudoVersion): vX.0.0-yyyymmddhhmmss-abcdefabcdef,
// vX.Y.Z-pre.0.yyyymmddhhmmss-abcdefabcdef, vX.Y.(Z+1)-0.yyyymmddhhmmss-abcdefabcdef.
var pseudoVersion = regexp.MustCompile(`^v[0-9]+\.(0\.0-|\d+\.\d+-([^+]*\.)?0\.)\d{14}-[A-Za-z0-9]+(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// controllerToolsVersion is the controller-gen the generated Makefile runs:
// the one Loom pins in testenv/versions.env (a test checks they agree), so
// that Loom's build of it in the assets folder can be reused.
const controllerToolsVersion = "v0.21.0"

// placeholderVersion stands for an unknown loom version in a new go.mod;
// a replace directive must then point at a checkout.
const placeholderVersion = "v0.0.0-00010101000000-000000000000"

func fill(p *project) {
	p.Namespace = p.Name + "-system"
	p.LoomVersion = loomVersion()
	if p.LoomVersion == "" {
		p.LoomVersion = placeholderVersion
	}
	p.GoVersion = "1.26.0"
	v := testenv.PinnedVersions()
	p.AssetsVersions = fmt.Sprintf("kube-%s_etcd-%s_kwok-%s", v.Kube, v.Etcd, v.Kwok)
	p.ToolsVersion = controllerToolsVersion
	p.Year = time.Now().Year()
}

var dnsLabel = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// checkDomain accepts a lower-case DNS subdomain (RFC 1123), as API group
// names are, short enough that a group's first label (up to 63
// characters) and a dot still fit in front of it.
func checkDomain(d string) error {
	if msgs := validation.IsDNS1123Subdomain(d); len(msgs) > 0 {
		return fmt.Errorf("%q is not a lower-case DNS subdomain, such as example.com: %s", d, strings.Join(msgs, "; "))
	}
	if limit := validation.DNS1123SubdomainMaxLength - validation.DNS1123LabelMaxLength - 1; len(d) > limit {
		return fmt.Errorf("%q is longer than %d characters, which leaves no room for the group's label", d, limit)
	}
	return nil
}

// checkModulePath accepts what go.mod's module line takes for a path to be
// published at, in the spirit of golang.org/x/mod/module.CheckPath: slash-
// separated elements of letters, digits and "-._~", none empty, starting
// or ending with a dot, or a Windows-reserved name; the first (the host)
// lower case, with a dot, not starting with a dash.
func checkModulePath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%q is not a Go module path: %s", p, why) }
	if p == "" {
		return bad("empty")
	}
	elems := strings.Split(p, "/")
	for _, e := range elems {
		switch {
		case e == "":
			return bad("empty path element")
		case e[0] == '.' || e[len(e)-1] == '.':
			return bad("an element starts or ends with a dot")
		case !modulePathElem.MatchString(e):
			return bad("an element has characters other than letters, digits and -._~")
		case windowsReserved(e):
			return bad(fmt.Sprintf("%q is a reserved file name on Windows", e))
		}
	}
	if host := elems[0]; !strings.Contains(host, ".") || host[0] == '-' || strings.ToLower(host) != host ||
		strings.ContainsAny(host, "_~") {
		return bad("the first element must be a lower-case host name with a dot, such as github.com")
	}
	return nil
}

var modulePathElem = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

func windowsReserved(e string) bool {
	base, _, _ := strings.Cut(strings.ToUpper(e), ".")
	switch base {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	return len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) && base[3] >= '1' && base[3] <= '9'
}

func runInit(_ context.Context, args []string, out, _ io.Writer) error {
	fs := flag.NewFlagSet("loom init", flag.ContinueOnError)
	domain := fs.String("domain", "", "the domain of the project's API groups, such as example.com (required)")
	repo := fs.String("repo", "", "the Go module path, such as github.com/example/memcached-operator (required)")
	license := fs.String("license", "apache2", "the license: apache2 or none")
	dir := fs.String("dir", ".", "the project folder (made if missing)")
	name := fs.String("project-name", "", "the operator's name, a DNS label (default: the last element of --repo)")
	pos, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(out, "Usage: loom init --domain D --repo MODULE [flags]\n\nStarts an operator project on Loom: go.mod, main.go, Makefile, config/ (kustomize), chart/ (Helm).\nExisting files are never overwritten.\n\n%s", flagUsage(fs))
		return err
	}
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("%w: loom init takes no arguments, got %q", errUsage, pos)
	case *domain == "" || *repo == "":
		return fmt.Errorf("%w: loom init needs --domain and --repo", errUsage)
	case *license != "apache2" && *license != "none":
		return fmt.Errorf("%w: --license %q: want apache2 or none", errUsage, *license)
	}
	if err := checkDomain(*domain); err != nil {
		return fmt.Errorf("%w: --domain: %v", errUsage, err)
	}
	if err := checkModulePath(*repo); err != nil {
		return fmt.Errorf("%w: --repo: %v", errUsage, err)
	}
	p := project{Domain: *domain, Repo: *repo, License: *license, Name: *name}
	if p.Name == "" {
		p.Name = strings.ToLower(strings.ReplaceAll(filepath.Base(*repo), "_", "-"))
	}
	if !dnsLabel.MatchString(p.Name) || len(p.Name) > 50 {
		return fmt.Errorf("%w: project name %q is not a DNS label of at most 50 characters; set --project-name", errUsage, p.Name)
	}
	fill(&p)
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	if err := render(out, *dir, "init", p, func(path string) bool {
		return path != "LICENSE" || p.License == "apache2"
	}); err != nil {
		return err
	}
	rec, _ := yaml.Marshal(p)
	if err := writeNew(out, *dir, projectFile, append([]byte("# What `loom init` was given; `loom create` reads it.\n"), rec...)); err != nil {
		return err
	}
	if p.LoomVersion == placeholderVersion {
		fmt.Fprintf(out, "\nThis loom is a development build: point the project at your Loom checkout before building it:\n  go mod edit -replace github.com/loom-k8s/loom=/path/to/loom\n")
	}
	fmt.Fprintf(out, "\nNext: loom create api --group G --version V --kind K, then go mod tidy && make generate test\n")
	return nil
}

func runCreate(_ context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || (args[0] != "api" && args[0] != "webhook") {
		return fmt.Errorf("%w: loom create needs api or webhook", errUsage)
	}
	what := args[0]
	fs := flag.NewFlagSet("loom create "+what, flag.ContinueOnError)
	group := fs.String("group", "", "the API group's first label, such as cache (the group is GROUP.DOMAIN) (required)")
	version := fs.String("version", "", "the API version, such as v1alpha1 (required)")
	kind := fs.String("kind", "", "the kind, such as Memcached (required)")
	namespaced := fs.Bool("namespaced", true, "objects of the kind live in namespaces (false: cluster-scoped)")
	plural := fs.String("plural", "", "the resource name (default: the kind in lower case, plural)")
	dir := fs.String("dir", ".", "the project folder (where `loom init` wrote PROJECT)")
	pos, err := parse(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(out, "Usage: loom create %s --group G --version V --kind K [flags]\n\n%s\n\n%s", what, createHelp[what], flagUsage(fs))
		return err
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: loom create %s takes no arguments, got %q", errUsage, what, pos)
	}
	if *group == "" || *version == "" || *kind == "" {
		return fmt.Errorf("%w: loom create %s needs --group, --version and --kind", errUsage, what)
	}
	if !dnsLabel.MatchString(*group) {
		return fmt.Errorf("%w: --group %q is not a DNS label", errUsage, *group)
	}
	if !regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`).MatchString(*version) {
		return fmt.Errorf("%w: --version %q is not a Kubernetes API version (v1, v1beta1, v2alpha3...)", errUsage, *version)
	}
	if !regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`).MatchString(*kind) {
		return fmt.Errorf("%w: --kind %q must be an exported Go identifier in CamelCase, such as Memcached", errUsage, *kind)
	}
	data, err := os.ReadFile(filepath.Join(*dir, projectFile))
	if err != nil {
		return fmt.Errorf("reading the project (run loom init first, or pass --dir): %w", err)
	}
	var p project
	if err := yaml.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("%s: %w", projectFile, err)
	}
	fill(&p)
	p.Group, p.Version, p.Kind, p.Namespaced = *group, *version, *kind, *namespaced
	p.Lower = strings.ToLower(*kind)
	p.Plural = *plural
	if p.Plural == "" {
		p.Plural = pluralize(p.Lower)
	}
	p.FullGroup = p.Group + "." + p.Domain
	if exists, same := versionGroup(filepath.Join(*dir, "api", p.Version), p.FullGroup); exists && !same {
		return fmt.Errorf("api/%s belongs to another API group than %s: a project has one group per version folder", p.Version, p.FullGroup)
	}
	others, err := otherVersions(*dir, p)
	if err != nil {
		return err
	}
	p.StorageVersion = len(others) == 0
	if what == "webhook" {
		if _, err := os.Stat(filepath.Join(*dir, "api", p.Version, p.Lower+"_types.go")); err != nil {
			return fmt.Errorf("no API for %s: run loom create api with the same --group, --version and --kind first", p.Kind)
		}
	}
	if err := render(out, *dir, what, p, nil); err != nil {
		return err
	}
	// Wire the new files in: a line at each +loom:scaffold marker of the
	// controller package's Run (a line already there is left alone).
	var lines []markerLine
	switch what {
	case "api":
		lines = []markerLine{
			{"imports", p.Version + ` "` + p.Repo + `/api/` + p.Version + `"`},
			{"scheme", p.Version + ".AddToScheme,"},
			{"setup", "setup" + p.Kind + "(mgr)"},
		}
	case "webhook":
		lines = []markerLine{{"webhooks", "setup" + p.Kind + "Webhooks(srv)"}}
	}
	if err := insertAtMarkers(out, *dir, controllerFile, lines); err != nil {
		return err
	}
	if what == "webhook" {
		// config/ registers the webhooks: the webhook folder (their
		// configurations and Service), and its patch of the Deployment
		// (--webhooks, the port).
		if err := insertAtMarkers(out, *dir, kustomizationFile, []markerLine{
			{"resources", "- webhook"},
			{"patches", "- {path: webhook/manager_patch.yaml, target: {kind: Deployment, name: " + p.Name + "}}"},
		}); err != nil {
			return err
		}
	}
	if what == "api" && len(others) > 0 {
		fmt.Fprintf(out, "\n%s is also in %s, which stays the storage version (+kubebuilder:storageversion).\n"+
			"Without a conversion webhook the API server converts between versions by changing apiVersion only,\n"+
			"so keep their schemas compatible, or serve a conversion webhook (package webhook's Conversion; see Loom's examples/at).\n",
			p.Kind, strings.Join(others, ", "))
	}
	fmt.Fprintf(out, "\nNext: make generate test\n")
	return nil
}

// createHelp describes what `loom create api` and `loom create webhook`
// write, for their -h.
var createHelp = map[string]string{
	"api": "Adds a kind: its Go types (api/VERSION), a reconciler and an end-to-end test (internal/controller),\n" +
		"a sample (config/samples), and a line at each +loom:scaffold marker of internal/controller/controller.go.\n" +
		"Existing files are never overwritten.",
	"webhook": "Adds a defaulting and a validating webhook for a kind that loom create api made, with a unit and an\n" +
		"end-to-end test (internal/controller), and their registration with the API server (config/webhook), which\n" +
		"it adds to config/kustomization.yaml, as it adds the webhooks to internal/controller/controller.go, at the\n" +
		"+loom:scaffold markers. Existing files are never overwritten.",
}

// controllerFile is where `loom create` wires new kinds and webhooks in;
// kustomizationFile is where `loom create webhook` adds config/webhook.
const (
	controllerFile    = "internal/controller/controller.go"
	kustomizationFile = "config/kustomization.yaml"
)

// markerLine is a line to insert before the "+loom:scaffold:<marker>"
// comment.
type markerLine struct{ marker, line string }

// insertAtMarkers inserts each line before its marker comment in
// dir/path ("// +loom:scaffold:<marker>" in a Go file, "# ..." in
// others), with the marker's indentation, unless the file has that line
// already. It fails, naming the marker, when a marker is missing (the
// user removed it: wire the kind in by hand).
func insertAtMarkers(out io.Writer, dir, path string, lines []markerLine) error {
	full := filepath.Join(dir, filepath.FromSlash(path))
	data, err := os.ReadFile(full)
	if err != nil {
		return err
	}
	isGo := strings.HasSuffix(path, ".go")
	comment := "#"
	if isGo {
		comment = "//"
	}
	text := strings.Split(string(data), "\n")
	changed := false
	for _, ml := range lines {
		if slices.ContainsFunc(text, func(l string) bool { return strings.TrimSpace(l) == ml.line }) {
			continue
		}
		marker := comment + " +loom:scaffold:" + ml.marker
		at := slices.IndexFunc(text, func(l string) bool { return strings.TrimSpace(l) == marker })
		if at < 0 {
			return fmt.Errorf("%s has no %s comment: add %q there by hand", path, marker, ml.line)
		}
		indent := text[at][:len(text[at])-len(strings.TrimLeft(text[at], " \t"))]
		text = slices.Insert(text, at, indent+ml.line)
		changed = true
	}
	if !changed {
		return nil
	}
	body := []byte(strings.Join(text, "\n"))
	if isGo {
		if body, err = format.Source(body); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := os.WriteFile(full, body, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "updated: %s\n", path)
	return nil
}

// otherVersions lists the versions other than p.Version under dir/api that
// hold p.Kind's types for p's API group.
func otherVersions(dir string, p project) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "api"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var vs []string
	for _, e := range entries {
		if !e.IsDir() || e.Name() == p.Version {
			continue
		}
		base := filepath.Join(dir, "api", e.Name())
		if _, err := os.Stat(filepath.Join(base, p.Lower+"_types.go")); err != nil {
			continue
		}
		if _, same := versionGroup(base, p.FullGroup); !same {
			continue
		}
		vs = append(vs, e.Name())
	}
	return vs, nil
}

// versionGroup reports whether the version folder dir has a
// groupversion_info.go, and whether that declares group.
func versionGroup(dir, group string) (exists, same bool) {
	gv, err := os.ReadFile(filepath.Join(dir, "groupversion_info.go"))
	if err != nil {
		return false, false
	}
	return true, strings.Contains(string(gv), "Group: \""+group+"\"")
}

// render writes every template under scaffold/<set> into dir, skipping
// (and listing) files that exist and those keep rejects.
func render(out io.Writer, dir, set string, p project, keep func(path string) bool) error {
	root := "scaffold/" + set
	return fs.WalkDir(scaffoldFS, root, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(name, root+"/"), ".tmpl")
		path, err := execute(rel, rel, p)
		if err != nil {
			return err
		}
		if keep != nil && !keep(string(path)) {
			return nil
		}
		src, err := scaffoldFS.ReadFile(name)
		if err != nil {
			return err
		}
		body, err := execute(name, string(src), p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(string(path), ".go") {
			if body, err = format.Source(body); err != nil {
				return fmt.Errorf("template %s: %w", name, err)
			}
		}
		return writeNew(out, dir, string(path), body)
	})
}

func execute(name, text string, p project) ([]byte, error) {
	t, err := template.New(name).Delims("[[", "]]").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// writeNew writes dir/path unless it exists: re-running never overwrites
// what the user may have changed.
func writeNew(out io.Writer, dir, path string, body []byte) error {
	full := filepath.Join(dir, filepath.FromSlash(path))
	if _, err := os.Lstat(full); err == nil {
		fmt.Fprintf(out, "skipped: %s (exists)\n", path)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "created: %s\n", path)
	return nil
}

// pluralize is the English plural of a lower-case kind, as kubebuilder
// makes it for the common cases; --plural overrides it.
func pluralize(s string) string {
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case strings.HasSuffix(s, "y") && len(s) > 1 && !strings.ContainsRune("aeiou", rune(s[len(s)-2])):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}
