package main

import (
	"context"
	"errors"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/rest"
)

// watch prints t and then every change to it until ctx ends, as kubectl
// get -w: in table output each change is a row under the first header,
// with columns that only widen; with --output-watch-events an EVENT column
// says ADDED, MODIFIED or DELETED (the current objects count as ADDED).
//
// A list is watched from its resourceVersion, so no change is missed or
// repeated. A named object is watched from "0" (the server's recent state,
// always inside its watch window) and the first event, which only restates
// the object, is not printed. When the server ends a watch, loom watches
// again from the last change seen. Cancelling ctx (Ctrl-C) ends it without
// an error.
func (g *getter) watch(ctx context.Context, t target, out io.Writer) error {
	human := g.opts.human()
	tw := newTableWriter(out)
	tp := &tablePrinter{opts: g.printOptions(t.mapping, g.opts.allNamespaces && t.mapping.Namespaced, false)}
	op := &objectPrinter{format: g.opts.output, managedFields: g.opts.managedFields}
	// show prints u, or in table output only takes note of its columns.
	show := func(u *unstructured.Unstructured, event watch.EventType, rows bool) error {
		if !g.opts.watchEvents {
			event = ""
		}
		if human {
			tab, err := tableFrom(u)
			if err != nil {
				return err
			}
			if !rows {
				tab.Rows = nil
			}
			tp.print(tw, tab, event)
			return tw.Flush()
		}
		if !rows {
			return nil
		}
		for _, it := range listItems(u) {
			if err := op.print(out, it, event); err != nil {
				return err
			}
		}
		return nil
	}

	rv, objRV := "", "" // of the listing, and of the one object named
	err := g.fetch(ctx, t, human, func(u *unstructured.Unstructured) error {
		if rv == "" {
			rv, objRV = u.GetResourceVersion(), eventRV(u)
		}
		return show(u, watch.Added, !g.opts.watchOnly)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	opts := metav1.ListOptions{ResourceVersion: rv, LabelSelector: g.opts.selector, FieldSelector: g.opts.fieldSelector}
	if t.name != "" {
		opts = metav1.ListOptions{ResourceVersion: "0", FieldSelector: fields.OneTermEqualSelector("metadata.name", t.name).String()}
	}
	for {
		skip := t.name != "" && opts.ResourceVersion == "0"
		r := g.request(target{mapping: t.mapping}).Options(&opts)
		if human {
			r.Header("Accept", tableAccept)
		}
		w, err := rest.Watch[unstructured.Unstructured](ctx, r)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return serverErr(err)
		}
		for {
			ev, err := w.Next()
			if err != nil {
				w.Stop()
				if ctx.Err() != nil {
					return nil
				}
				if !errors.Is(err, io.EOF) {
					return err
				}
				break // the server ended the watch: watch again from opts.ResourceVersion
			}
			switch ev.Type {
			case watch.Error:
				w.Stop()
				return serverErr(ev.Err())
			case watch.Bookmark:
				opts.ResourceVersion = ev.Object.GetResourceVersion()
				continue
			}
			v := eventRV(ev.Object)
			if v != "" {
				opts.ResourceVersion = v
			}
			// A named object's watch starts by restating it, as it is
			// now: printed only if it changed since it was fetched.
			rows := !skip || v != objRV
			if skip && rows {
				ev.Type = watch.Modified
			}
			if err := show(ev.Object, ev.Type, rows); err != nil {
				w.Stop()
				return err
			}
			skip = false
		}
		// A pause, so that a server that keeps ending watches at once is
		// not asked again in a tight loop; nothing is missed meanwhile.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// eventRV returns the resourceVersion of a watch event's object: a Table's
// row object, or the object itself.
func eventRV(u *unstructured.Unstructured) string {
	if u.GetKind() == "Table" {
		rows, _, _ := unstructured.NestedSlice(u.Object, "rows")
		for i := len(rows) - 1; i >= 0; i-- {
			row, _ := rows[i].(map[string]any)
			if v, _, _ := unstructured.NestedString(row, "object", "metadata", "resourceVersion"); v != "" {
				return v
			}
		}
	}
	return u.GetResourceVersion()
}
