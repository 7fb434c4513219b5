package cache

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The reflector's decisions. A Reflector's Run carries out one action at a
// time (list, stream a list, open a watch, read its next event, let go of
// objects for Narrow, wait) and feeds what came of it back to step, which
// says what to do next. step does no I/O, reads no clock, draws no random
// number and takes no lock: everything it decides from is in its
// arguments, so scripts (testdata/reflector/*.txt) walk it through whole
// scenarios.
//
// A round is what the reflector does from one fresh start to the next:
// let go of objects if Narrow asked, list if the store needs a full list,
// then watch until the watch ends or fails. A round that ends after it
// made progress starts the next one at once; one that made none is a
// failure, followed by a wait.

// reflectorPhase is what the reflector is doing, or is about to do.
type reflectorPhase uint8

const (
	phaseNew      reflectorPhase = iota // Run has not begun
	phaseList                           // a paginated list
	phaseStream                         // a streaming list, until its initial events end
	phaseWatch                          // a watch being opened
	phaseWatching                       // an open watch being read
	phasePrune                          // letting go of objects for Narrow
	phaseWait                           // waiting after a failure
	phaseStopped                        // a store refused a write: Run returned
)

var phaseNames = [...]string{"new", "list", "stream", "watch", "watching", "prune", "wait", "stopped"}

func (p reflectorPhase) String() string { return phaseNames[p] }

// reflectorState is everything step decides from.
type reflectorState struct {
	phase reflectorPhase
	// rv is the resourceVersion the next watch starts from: that of the
	// newest list, event or bookmark.
	rv string
	// mustList says the store needs a full list before the next watch: at
	// first, after 410 Gone, after Relist, and until a list succeeds.
	mustList bool
	// noStream says lists are paginated only: streaming lists are off, or
	// the server refused one.
	noStream bool
	// streamed says the open watch is a streaming list's, going on after
	// its initial events.
	streamed bool
	// progressed says the round under way made progress: a streaming list
	// filled the store, or its watch moved rv on or lived minProgress.
	progressed bool
	// failures counts the rounds in a row that made no progress.
	failures int
	// relist and narrow say that Relist or Narrow was called and that no
	// action serving the call has begun yet.
	relist, narrow bool
	// initialBackoff and maxBackoff bound the waits after failures
	// (ReflectorOptions, defaults applied).
	initialBackoff, maxBackoff time.Duration
}

// eventKind is what happened.
type eventKind uint8

const (
	evStart         eventKind = iota // Run begins
	evListed                         // a paginated list filled the store (rv)
	evStreamed                       // a streaming list's initial events filled the store (rv); its watch stays open
	evStreamRefused                  // the server refused a streaming list
	evListFailed                     // a list or streaming list failed (class)
	evOpened                         // a watch was opened
	evWatchFailed                    // a watch could not be opened (class)
	evEvent                          // an open watch delivered an object, now in the store (rv)
	evBookmark                       // an open watch delivered a bookmark (rv)
	evEnded                          // an open watch ended (class; clean when the server closed it)
	evPruned                         // the objects Narrow rejects are gone
	evWaited                         // the wait is over
	evRelist                         // Relist was called
	evNarrow                         // Narrow was called
	evStoreFailed                    // the store refused a write
)

var eventNames = [...]string{"start", "listed", "streamed", "stream-refused", "list-failed", "opened", "watch-failed",
	"event", "bookmark", "ended", "pruned", "waited", "relist", "narrow", "store-failed"}

func (k eventKind) String() string { return eventNames[k] }

// failClass sorts the ways a list or watch can end, for step.
type failClass uint8

const (
	clean           failClass = iota // no error: the server ended the watch
	failOther                        // the server refused or failed the request
	failUnreachable                  // the server could not be reached, or is not serving yet
	failGone                         // 410 Gone: the resourceVersion was compacted
	failInterrupted                  // Relist or Narrow cut the action short
)

var classNames = [...]string{"clean", "other", "unreachable", "gone", "interrupted"}

func (c failClass) String() string { return classNames[c] }

// reflectorEvent is what happened, as step needs to know it.
type reflectorEvent struct {
	kind eventKind
	// rv is the resourceVersion of a list, event or bookmark.
	rv string
	// class is how a list or watch failed or ended, and retryAfter the
	// wait the server asked for (a 429's or 503's Retry-After), if any.
	class      failClass
	retryAfter time.Duration
	// lived is how long an ended watch lasted, from when it was asked
	// for.
	lived time.Duration
}

// actionKind is what to do next.
type actionKind uint8

const (
	actNone       actionKind = iota // go on with the action under way
	actList                         // a paginated list
	actStream                       // a streaming list
	actWatch                        // open a watch from rv
	actRead                         // read the open watch's next event
	actPrune                        // let go of the objects Narrow rejects
	actWait                         // wait, then report evWaited
	actStop                         // return the store's error
	actUnexpected                   // the event makes no sense in this phase: a bug
)

var actionNames = [...]string{"none", "list", "stream", "watch", "read", "prune", "wait", "stop", "unexpected"}

// reflectorAction is what step decided.
type reflectorAction struct {
	kind actionKind
	// rv is where a watch starts.
	rv string
	// A wait is drawn at random in [waitMin, waitMax], so that many
	// reflectors do not retry in step, and is then at least waitFloor.
	waitMin, waitMax, waitFloor time.Duration
	// report says the round that just ended failed: its error is
	// reported (ErrorHandler, LastError, Stats.Errors).
	report bool
	// broken says a watch that had made progress ended with an error: it
	// is counted in Stats.BrokenWatches, not reported.
	broken bool
}

func (a reflectorAction) String() string {
	var b strings.Builder
	b.WriteString(actionNames[a.kind])
	switch a.kind {
	case actWatch:
		fmt.Fprintf(&b, " rv=%s", a.rv)
	case actWait:
		fmt.Fprintf(&b, " %v..%v", a.waitMin, a.waitMax)
		if a.waitFloor > 0 {
			fmt.Fprintf(&b, ", at least %v", a.waitFloor)
		}
	}
	if a.report {
		b.WriteString("; report")
	}
	if a.broken {
		b.WriteString("; broken watch")
	}
	return b.String()
}

func (st reflectorState) String() string {
	var b strings.Builder
	b.WriteString(st.phase.String())
	if st.rv != "" {
		fmt.Fprintf(&b, " rv=%s", st.rv)
	}
	if st.failures > 0 {
		fmt.Fprintf(&b, " failures=%d", st.failures)
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{st.mustList, "must-list"}, {st.noStream, "no-stream"}, {st.streamed, "streamed"}, {st.progressed, "progressed"}, {st.relist, "relist"}, {st.narrow, "narrow"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	return b.String()
}

// newReflectorState is the state of a Run about to begin: it lists first.
func newReflectorState(rv string, noStream bool, initialBackoff, maxBackoff time.Duration) reflectorState {
	return reflectorState{rv: rv, mustList: true, noStream: noStream, initialBackoff: initialBackoff, maxBackoff: maxBackoff}
}

// step decides what the reflector does after ev, in state st.
//
// Relist and Narrow calls (evRelist, evNarrow) are taken just before an
// action begins, and may change it: Relist makes it a list, Narrow a
// prune (or nothing more, when a list is due anyway: it serves the call).
// A call made while an action is under way cuts it short; that action
// ends with failInterrupted, and the call is taken before the next one.
func step(st reflectorState, ev reflectorEvent) (reflectorState, reflectorAction) {
	switch ev.kind {
	case evRelist, evNarrow:
		if ev.kind == evRelist {
			st.relist = true
		} else {
			st.narrow = true
		}
		switch st.phase {
		case phaseList, phaseStream, phaseWatch, phasePrune:
			// About to begin: decide again.
			return st.next()
		case phaseNew, phaseWatching, phaseWait:
			// Served once Run has begun, or the watch under way or the
			// wait is over.
			return st, reflectorAction{kind: actNone}
		}
	case evStoreFailed:
		switch st.phase {
		case phaseList, phaseStream, phaseWatching, phasePrune:
			st.phase = phaseStopped
			return st, reflectorAction{kind: actStop}
		}
	case evStart:
		if st.phase == phaseNew {
			return st.next()
		}
	case evListed:
		if st.phase == phaseList {
			st.rv, st.mustList = ev.rv, false
			return st.watch()
		}
	case evStreamed:
		if st.phase == phaseStream {
			// The streaming list's watch goes on from the end of its
			// initial events.
			st.rv, st.mustList, st.progressed, st.streamed = ev.rv, false, true, true
			st.phase = phaseWatching
			return st, reflectorAction{kind: actRead}
		}
	case evStreamRefused:
		if st.phase == phaseStream {
			// Paginated lists from now on, beginning with this one.
			st.noStream = true
			st.phase = phaseList
			return st, reflectorAction{kind: actList}
		}
	case evListFailed:
		if st.phase == phaseList || st.phase == phaseStream {
			return st.end(ev)
		}
	case evOpened:
		if st.phase == phaseWatch {
			st.phase = phaseWatching
			return st, reflectorAction{kind: actRead}
		}
	case evWatchFailed:
		if st.phase == phaseWatch {
			return st.end(ev)
		}
	case evEvent, evBookmark:
		if st.phase == phaseWatching {
			if ev.rv != "" && ev.rv != st.rv {
				st.rv, st.progressed = ev.rv, true
			}
			return st, reflectorAction{kind: actRead}
		}
	case evEnded:
		if st.phase != phaseWatching {
			break
		}
		if ev.class == clean && st.streamed {
			// A streaming list's watch that the server ended: watch
			// again from where it was, in the same round.
			st.streamed = false
			return st.watch()
		}
		if ev.lived >= minProgress {
			st.progressed = true
		}
		if ev.class == clean && !st.progressed {
			// Closed at once with no events: a failure, so that a
			// server that keeps doing so is not hammered.
			ev.class = failOther
		}
		return st.end(ev)
	case evPruned:
		if st.phase == phasePrune {
			return st.next()
		}
	case evWaited:
		if st.phase == phaseWait {
			return st.next()
		}
	}
	return st, reflectorAction{kind: actUnexpected}
}

// next begins a round: a list if the store needs one (it serves the
// Relist and Narrow calls taken so far), else a prune if Narrow was
// called, else a watch.
func (st reflectorState) next() (reflectorState, reflectorAction) {
	st.progressed, st.streamed = false, false
	if st.relist {
		st.mustList = true
	}
	switch {
	case st.mustList:
		st.relist, st.narrow = false, false
		if st.noStream {
			st.phase = phaseList
			return st, reflectorAction{kind: actList}
		}
		st.phase = phaseStream
		return st, reflectorAction{kind: actStream}
	case st.narrow:
		st.narrow = false
		st.phase = phasePrune
		return st, reflectorAction{kind: actPrune}
	}
	return st.watch()
}

// watch opens a watch from rv.
func (st reflectorState) watch() (reflectorState, reflectorAction) {
	st.phase = phaseWatch
	return st, reflectorAction{kind: actWatch, rv: st.rv}
}

// end ends the round under way, which failed or whose watch ended as ev
// says.
func (st reflectorState) end(ev reflectorEvent) (reflectorState, reflectorAction) {
	switch ev.class {
	case failInterrupted:
		// Cut short by Relist or Narrow: not a failure. Begin again
		// at once; the call is taken before the next action.
		st.failures = 0
		return st.next()
	case failGone:
		st.mustList = true
	}
	if st.progressed {
		// A normal end: the watch did its work until it ended. Watch
		// (or list) again at once, and start the count of failures over.
		broken := ev.class != clean && ev.class != failGone
		st.failures = 0
		st, act := st.next()
		act.broken = broken
		return st, act
	}
	if ev.class == failGone && st.failures == 0 {
		// The first list after 410 Gone is the cure, not a failure.
		st.failures++
		return st.next()
	}
	d := st.backoff(ev.class)
	st.failures++
	st.phase, st.progressed, st.streamed = phaseWait, false, false
	return st, reflectorAction{kind: actWait, waitMin: d / 2, waitMax: d, waitFloor: ev.retryAfter, report: ev.class != failGone}
}

// maxProbe bounds the wait between attempts while the server cannot be
// reached: a refused connection costs the server nothing, and a restarted
// server should be seen within about this long of answering again.
const maxProbe = time.Second

// firstProbe is the first such wait.
const firstProbe = 100 * time.Millisecond

// backoff is the longest wait after a round that failed as class, given
// the failures before it; the wait is drawn between half of it and it.
func (st reflectorState) backoff(class failClass) time.Duration {
	if class == failUnreachable {
		return exponential(min(firstProbe, st.initialBackoff), st.failures, min(maxProbe, st.maxBackoff))
	}
	return exponential(st.initialBackoff, st.failures, st.maxBackoff)
}

// exponential is first doubled n times, at most limit.
func exponential(first time.Duration, n int, limit time.Duration) time.Duration {
	d := first << min(n, 16)
	if d <= 0 || d > limit {
		d = limit
	}
	return d
}

// classify sorts a list or watch error for step, and returns the wait the
// server asked for, if any. nil is a clean end; errRelist is 410 Gone.
func classify(err error) (failClass, time.Duration) {
	switch {
	case err == nil:
		return clean, 0
	case errors.Is(err, errRelist):
		return failGone, 0
	}
	class := failOther
	if unreachable(err) {
		class = failUnreachable
	}
	var after time.Duration
	if secs, ok := apierrors.SuggestsClientDelay(err); ok && secs > 0 {
		after = time.Duration(secs) * time.Second
	}
	return class, after
}
