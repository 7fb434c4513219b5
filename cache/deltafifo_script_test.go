package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loom-k8s/loom/cache"
)

// item is the element type of the DeltaFIFO scripts: a key and a
// version, written key=version ("a/x=2"). delete may omit the version.
type item struct{ Key, Val string }

func itemKey(it item) (string, error) { return it.Key, nil }

func parseItem(arg string) item {
	k, v, _ := strings.Cut(arg, "=")
	return item{Key: k, Val: v}
}

func fmtDeltas(key string, ds []cache.Delta[item]) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		s := d.Type.String() + "(" + d.Object.Val
		if d.FinalStateUnknown {
			s += ",unknown"
		}
		parts[i] = s + ")"
	}
	return key + ": " + strings.Join(parts, " ")
}

type fifoState struct {
	fifo   *cache.DeltaFIFO[item]
	known  *cache.Store[item] // nil without known objects
	closed bool
}

// TestDeltaFIFOScripts runs testdata/deltafifo/*.txt. Commands:
//
//	new [known]            a fresh DeltaFIFO, with a Store as KnownObjects
//	add|update|delete k=v… one call per argument
//	replace k=v…           one Replace with the listed items
//	resync                 Resync
//	prune v…               let go (as an informer's Narrow does) of the
//	                       items whose newest version is one of v…
//	known [k=v…]           put items in the known store; without
//	                       arguments, print it sorted by key
//	queue                  print the queued keys and their deltas
//	pop [n|all] [fail]     pop n keys (default 1) and print them; deltas
//	                       are applied to the known store, as an informer
//	                       does; with fail, process returns an error
//	synced                 print HasSynced
//	close                  Close
//	len                    print Len
func TestDeltaFIFOScripts(t *testing.T) {
	runScripts(t, "testdata/deltafifo/*.txt", func() *fifoState { return &fifoState{} }, execFIFO)
}

func execFIFO(s *fifoState, c scriptCmd) string {
	var out []string
	report := func(err error) {
		if err != nil {
			out = append(out, "error: "+err.Error())
		}
	}
	switch c.cmd {
	case "new":
		opts := cache.DeltaFIFOOptions[item]{KeyFunc: itemKey}
		s.known, s.closed = nil, false
		if slices.Contains(c.args, "known") {
			s.known = cache.NewStore(cache.StoreOptions[item]{KeyFunc: itemKey})
			opts.KnownObjects = s.known
		}
		s.fifo = cache.NewDeltaFIFO(opts)
	case "add", "update", "delete":
		for _, a := range c.args {
			it := parseItem(a)
			switch c.cmd {
			case "add":
				report(s.fifo.Add(it))
			case "update":
				report(s.fifo.Update(it))
			case "delete":
				report(s.fifo.Delete(it))
			}
		}
	case "replace":
		var items []item
		for _, a := range c.args {
			items = append(items, parseItem(a))
		}
		report(s.fifo.Replace(items))
	case "resync":
		report(s.fifo.Resync())
	case "prune":
		report(cache.PruneDeltaFIFO(s.fifo, func(it item) bool { return !slices.Contains(c.args, it.Val) }))
	case "known":
		if len(c.args) == 0 {
			keys := s.known.ListKeys()
			slices.Sort(keys)
			for _, k := range keys {
				it, _ := s.known.Get(k)
				out = append(out, k+"="+it.Val)
			}
			if len(keys) == 0 {
				out = append(out, "(empty)")
			}
			break
		}
		for _, a := range c.args {
			report(s.known.Add(parseItem(a)))
		}
	case "queue":
		for _, k := range s.fifo.ListKeys() {
			ds, _ := s.fifo.Deltas(k)
			out = append(out, fmtDeltas(k, ds))
		}
		if len(out) == 0 {
			out = append(out, "(empty)")
		}
	case "pop":
		n, fail := 1, false
		for _, a := range c.args {
			switch a {
			case "all":
				n = -1
			case "fail":
				fail = true
			default:
				n, _ = strconv.Atoi(a)
			}
		}
		for i := 0; n < 0 || i < n; i++ {
			if s.fifo.Len() == 0 {
				// Pop would block, unless the queue is closed.
				if s.closed {
					err := s.fifo.Pop(context.Background(), nil)
					out = append(out, fmt.Sprintf("pop: %v", err))
				} else if n >= 0 {
					out = append(out, "empty")
				}
				break
			}
			err := s.fifo.Pop(context.Background(), func(key string, ds []cache.Delta[item]) error {
				out = append(out, fmtDeltas(key, ds))
				if s.known != nil {
					for _, d := range ds {
						if d.Type == cache.Deleted {
							_ = s.known.Delete(d.Object)
						} else {
							_ = s.known.Update(d.Object)
						}
					}
				}
				if fail {
					return errors.New("boom")
				}
				return nil
			})
			report(err)
		}
	case "synced":
		out = append(out, strconv.FormatBool(s.fifo.HasSynced()))
	case "close":
		s.fifo.Close()
		s.closed = true
	case "len":
		out = append(out, strconv.Itoa(s.fifo.Len()))
	default:
		out = append(out, fmt.Sprintf("unknown command %q", c.cmd))
	}
	return strings.Join(out, "\n")
}
