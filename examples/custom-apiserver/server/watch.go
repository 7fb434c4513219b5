package server

import (
	"context"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// watcher is one watch on a Store. Events are sent to its channel while
// the backend's lock is held, so a watcher whose buffer is full is closed
// rather than waited for: its client re-watches from the last event it got.
type watcher struct {
	s      *Store
	f      filter
	ch     chan watch.Event
	closed bool // guarded by the backend's lock
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.ch }

func (w *watcher) Stop() {
	w.s.b.mu.Lock()
	defer w.s.b.mu.Unlock()
	w.closeLocked()
}

func (w *watcher) closeLocked() {
	if !w.closed {
		w.closed = true
		close(w.ch)
		delete(w.s.watchers, w)
	}
}

// sendLocked delivers ev, or closes the watcher if it is too far behind.
func (w *watcher) sendLocked(ev watch.Event) {
	if w.closed {
		return
	}
	select {
	case w.ch <- ev:
	default:
		w.closeLocked()
	}
}

// eventFor turns a change into the event this watcher should see: an
// object that stops matching its selectors is deleted for it, one that
// starts matching is added.
func (w *watcher) eventFor(ev watch.Event, old runtime.Object) (watch.Event, bool) {
	now := w.f.matches(ev.Object)
	was := old != nil && w.f.matches(old)
	switch {
	case ev.Type == watch.Modified && now && !was:
		return watch.Event{Type: watch.Added, Object: ev.Object}, true
	case ev.Type == watch.Modified && !now && was:
		return watch.Event{Type: watch.Deleted, Object: ev.Object}, true
	case ev.Type == watch.Modified:
		return ev, now
	default:
		return ev, now
	}
}

// broadcastLocked records ev in the history and sends it to every watcher.
// old is the object before the change (nil on create).
func (s *Store) broadcastLocked(ev watch.Event, old runtime.Object) {
	s.history = append(s.history, historyEvent(ev, old))
	if len(s.history) > historySize {
		drop := s.history[0]
		s.since = rvOf(drop.Object)
		s.history = s.history[1:]
	}
	for w := range s.watchers {
		if e, ok := w.eventFor(ev, old); ok {
			w.sendLocked(e)
		}
	}
}

// historyEvent keeps the previous object with the event, for selectors
// applied when a watch replays history.
func historyEvent(ev watch.Event, old runtime.Object) watch.Event {
	if old != nil {
		ev.Object = &withOld{Object: ev.Object, old: old}
	}
	return ev
}

// withOld carries the object before a change inside the history.
type withOld struct {
	runtime.Object
	old runtime.Object
}

func unwrap(ev watch.Event) (watch.Event, runtime.Object) {
	if w, ok := ev.Object.(*withOld); ok {
		ev.Object = w.Object
		return ev, w.old
	}
	return ev, nil
}

func rvOf(obj runtime.Object) uint64 {
	if w, ok := obj.(*withOld); ok {
		obj = w.Object
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv
}

// Watch follows the resource's changes.
//
//   - From resourceVersion "" or "0", it first sends every matching object
//     as ADDED.
//   - From a later resourceVersion, it replays the changes after it, if the
//     store still has them; otherwise it fails with 410 Gone (the history
//     keeps the last 1,000 changes of the resource, and starts empty when
//     the server starts).
//   - With sendInitialEvents=true (a streaming list), it sends every
//     matching object as ADDED, then a BOOKMARK annotated
//     k8s.io/initial-events-end at the current resourceVersion.
func (s *Store) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	f := s.filterFor(ctx, opts)
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.closed {
		return nil, apierrors.NewServiceUnavailable("the server is shutting down")
	}

	var initial []watch.Event
	rvString := ""
	if opts != nil {
		rvString = opts.ResourceVersion
	}
	streaming := opts != nil && opts.SendInitialEvents != nil && *opts.SendInitialEvents
	switch {
	case streaming || rvString == "" || rvString == "0":
		for _, k := range s.sortedKeysLocked() {
			if o := s.objects[k]; f.matches(o) {
				initial = append(initial, watch.Event{Type: watch.Added, Object: o.DeepCopyObject()})
			}
		}
		if streaming && opts.AllowWatchBookmarks {
			mark := s.Resource.New()
			m, _ := meta.Accessor(mark)
			m.SetResourceVersion(strconv.FormatUint(s.b.rv, 10))
			m.SetAnnotations(map[string]string{"k8s.io/initial-events-end": "true"})
			initial = append(initial, watch.Event{Type: watch.Bookmark, Object: mark})
		}
	default:
		rv, err := strconv.ParseUint(rvString, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid resourceVersion " + strconv.Quote(rvString))
		}
		if rv < s.since {
			return nil, apierrors.NewResourceExpired("too old resource version: " + rvString + " (" + strconv.FormatUint(s.since, 10) + ")")
		}
		if rv > s.b.rv {
			// Newer than anything this store wrote: the file was replaced by
			// an older one. Events in between are unknown, so the client must
			// relist, as after a compaction.
			return nil, apierrors.NewResourceExpired("resource version " + rvString + " is newer than the store's " +
				strconv.FormatUint(s.b.rv, 10) + " (was the storage file restored from an older copy?)")
		}
		w := &watcher{f: f}
		for _, ev := range s.history {
			if rvOf(ev.Object) <= rv {
				continue
			}
			ev, old := unwrap(ev)
			if e, ok := w.eventFor(ev, old); ok {
				initial = append(initial, watch.Event{Type: e.Type, Object: e.Object.DeepCopyObject()})
			}
		}
	}
	w := &watcher{s: s, f: f, ch: make(chan watch.Event, len(initial)+watchBuffer)}
	for _, ev := range initial {
		w.ch <- ev
	}
	s.watchers[w] = struct{}{}
	return w, nil
}
