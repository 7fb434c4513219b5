package workqueue_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/workqueue"
)

// model is a plain re-statement of the queue's documented behaviour,
// used to check Queue on random single-goroutine operation sequences.
type model struct {
	now        time.Duration
	ready      []string
	readySet   map[string]bool
	processing map[string]bool // value: dirty
	waiting    map[string]wait
	seq        int
}

type wait struct {
	at  time.Duration
	seq int
}

func newModel() *model {
	return &model{readySet: map[string]bool{}, processing: map[string]bool{}, waiting: map[string]wait{}}
}

func (m *model) add(k string) {
	if dirty, ok := m.processing[k]; ok {
		if !dirty {
			m.processing[k] = true
		}
		return
	}
	if !m.readySet[k] {
		m.readySet[k] = true
		m.ready = append(m.ready, k)
	}
}

func (m *model) addAfter(k string, d time.Duration) {
	if d <= 0 {
		delete(m.waiting, k)
		m.add(k)
		return
	}
	at := m.now + d
	if w, ok := m.waiting[k]; ok {
		if at < w.at {
			m.waiting[k] = wait{at, w.seq}
		}
		return
	}
	m.seq++
	m.waiting[k] = wait{at, m.seq}
}

func (m *model) step(d time.Duration) {
	m.now += d
	var due []string
	for k, w := range m.waiting {
		if w.at <= m.now {
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b string) int {
		wa, wb := m.waiting[a], m.waiting[b]
		return cmp.Or(cmp.Compare(wa.at, wb.at), cmp.Compare(wa.seq, wb.seq))
	})
	for _, k := range due {
		delete(m.waiting, k)
		m.add(k)
	}
}

func (m *model) get() string {
	k := m.ready[0]
	m.ready = m.ready[1:]
	delete(m.readySet, k)
	m.processing[k] = false
	return k
}

func (m *model) done(k string) {
	dirty := m.processing[k]
	delete(m.processing, k)
	if dirty {
		m.add(k)
	}
}

// TestAgainstModel runs random sequences of Add, AddAfter, clock steps,
// Get and Done and compares every Get and Len with the model. Each run is
// a testing/synctest bubble, whose fake time makes it deterministic.
func TestAgainstModel(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		synctest.Test(t, func(t *testing.T) { againstModel(t, seed) })
	}
}

// againstModel is one run of TestAgainstModel, in a synctest bubble.
func againstModel(t *testing.T, seed int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	q := workqueue.New(workqueue.Options[string]{})
	defer q.ShutDown()
	m := newModel()
	keys := 2 + rng.IntN(10)
	for op := range 1000 {
		k := strconv.Itoa(rng.IntN(keys))
		switch c := rng.IntN(10); {
		case c < 2:
			q.Add(k)
			m.add(k)
		case c < 5:
			d := time.Duration(rng.IntN(6)-1) * time.Second
			q.AddAfter(k, d)
			m.addAfter(k, d)
		case c < 6:
			d := time.Duration(rng.IntN(3000)) * time.Millisecond
			step(d)
			m.step(d)
		case c < 8:
			if len(m.ready) == 0 {
				continue
			}
			want := m.get()
			if got, ok := q.Get(); !ok || got != want {
				t.Fatalf("seed %d op %d: Get = %q, %v; want %q", seed, op, got, ok, want)
			}
		default:
			if len(m.processing) == 0 {
				continue
			}
			ps := make([]string, 0, len(m.processing))
			for p := range m.processing {
				ps = append(ps, p)
			}
			slices.Sort(ps)
			p := ps[rng.IntN(len(ps))]
			q.Done(p)
			m.done(p)
		}
		if got, want := q.Len(), len(m.ready); got != want {
			t.Fatalf("seed %d op %d: Len = %d, want %d", seed, op, got, want)
		}
	}
}

// step moves the time of the current testing/synctest bubble forward by
// d and returns once every goroutine of the bubble, such as a queue's
// timer callback, is blocked again: by then the queue has made ready
// every item due by the new time.
func step(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// TestOneTimer checks that pending delays share one timer and that
// ShutDown disarms every timer. It needs a fake clock that counts armed
// timers, which a synctest bubble does not do.
func TestOneTimer(t *testing.T) {
	clk := clock.NewFake(epoch)
	q := workqueue.NewWithClock(workqueue.Options[string]{}, clk)
	for i := range 1000 {
		q.AddAfter(strconv.Itoa(i), time.Duration(1000-i)*time.Millisecond)
	}
	if n := clk.Waiters(); n != 1 {
		t.Fatalf("armed timers with 1000 pending delays = %d, want 1", n)
	}
	clk.Step(500 * time.Millisecond)
	if n, w := q.Len(), clk.Waiters(); n != 500 || w != 1 {
		t.Fatalf("after 500ms: Len = %d, timers = %d; want 500, 1", n, w)
	}
	q.ShutDown()
	if n := clk.Waiters(); n != 0 {
		t.Fatalf("armed timers after ShutDown = %d, want 0", n)
	}
}

// TestFakeTimeExample runs the test that Example_fakeTime shows.
func TestFakeTimeExample(t *testing.T) {
	testRequeueAfter(t)
}
