package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/discovery"
)

func init() {
	commands["api-resources"] = command{"print the resources the server serves (as kubectl api-resources)", runAPIResources}
	commands["api-versions"] = command{"print the group versions the server serves (as kubectl api-versions)", runAPIVersions}
}

// newTabWriter aligns columns as kubectl's printers do.
func newTabWriter(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 6, 4, 3, ' ', 0) }

// runAPIResources prints the preferred version of every resource, sorted
// by group then name (or by name or kind), with kubectl's columns.
func runAPIResources(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom api-resources", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	output := fs.String("o", "", "output format: wide or name")
	noHeaders := fs.Bool("no-headers", false, "do not print headers")
	group := fs.String("api-group", "", "only resources in this API group")
	namespaced := fs.String("namespaced", "", "true: only namespaced resources; false: only cluster-scoped")
	verbs := fs.String("verbs", "", "only resources that support all these verbs (comma-separated)")
	categories := fs.String("categories", "", "only resources in all these categories (comma-separated)")
	sortBy := fs.String("sort-by", "", "sort by name or kind (default: group, then name)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: loom api-resources takes no arguments, got %q", errUsage, pos)
	}
	if *output != "" && *output != "wide" && *output != "name" {
		return fmt.Errorf("%w: -o %s: want wide or name", errUsage, *output)
	}
	if *sortBy != "" && *sortBy != "name" && *sortBy != "kind" {
		return fmt.Errorf("%w: --sort-by accepts only name or kind", errUsage)
	}
	if *namespaced != "" && *namespaced != "true" && *namespaced != "false" {
		return fmt.Errorf("%w: --namespaced takes true or false", errUsage)
	}
	groupSet := false
	fs.Visit(func(f *flag.Flag) { groupSet = groupSet || f.Name == "api-group" })

	rc, _, err := conn.client()
	if err != nil {
		return err
	}
	lists, discErr := discovery.New(rc, discovery.Options{}).ServerPreferredResources(ctx)
	var partial *discovery.GroupDiscoveryFailedError
	if discErr != nil && !errors.As(discErr, &partial) {
		return discErr
	}
	var rows []metav1.APIResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			switch {
			case len(r.Verbs) == 0,
				groupSet && gv.Group != *group,
				*namespaced != "" && fmt.Sprint(r.Namespaced) != *namespaced,
				*verbs != "" && !containsAll(r.Verbs, strings.Split(*verbs, ",")),
				*categories != "" && !containsAll(r.Categories, strings.Split(*categories, ",")):
				continue
			}
			r.Group, r.Version = gv.Group, gv.Version
			rows = append(rows, r)
		}
	}
	key := func(r metav1.APIResource) string { return r.Group }
	switch *sortBy {
	case "name":
		key = func(r metav1.APIResource) string { return r.Name }
	case "kind":
		key = func(r metav1.APIResource) string { return r.Kind }
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if a, b := key(rows[i]), key(rows[j]); a != b {
			return a < b
		}
		return rows[i].Name < rows[j].Name
	})

	w := newTabWriter(out)
	if !*noHeaders && *output != "name" {
		cols := "NAME\tSHORTNAMES\tAPIVERSION\tNAMESPACED\tKIND"
		if *output == "wide" {
			cols += "\tVERBS\tCATEGORIES"
		}
		fmt.Fprintln(w, cols)
	}
	for _, r := range rows {
		gv := schema.GroupVersion{Group: r.Group, Version: r.Version}.String()
		switch *output {
		case "name":
			name := r.Name
			if r.Group != "" {
				name += "." + r.Group
			}
			fmt.Fprintln(w, name)
		case "wide":
			fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\t%s\t%s\n", r.Name, strings.Join(r.ShortNames, ","), gv, r.Namespaced, r.Kind,
				strings.Join(r.Verbs, ","), strings.Join(r.Categories, ","))
		default:
			fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", r.Name, strings.Join(r.ShortNames, ","), gv, r.Namespaced, r.Kind)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return discErr
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// runAPIVersions prints every group version the server serves, sorted.
func runAPIVersions(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom api-versions", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: loom api-versions takes no arguments, got %q", errUsage, pos)
	}
	rc, _, err := conn.client()
	if err != nil {
		return err
	}
	groups, err := discovery.New(rc, discovery.Options{}).ServerGroups(ctx)
	if err != nil {
		return fmt.Errorf("couldn't get available api versions from server: %w", err)
	}
	vs := metav1.ExtractGroupVersions(groups)
	sort.Strings(vs)
	for _, v := range vs {
		fmt.Fprintln(out, v)
	}
	return nil
}
