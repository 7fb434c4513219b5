package queuetest_test

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/workqueue"
	"github.com/loom-k8s/loom/workqueue/queuetest"
)

// bugs selects a defect of the sketch queue, to show that the kit catches it.
type bugs struct {
	noDedup        bool // a ready item is queued again on each Add
	dropWhileBusy  bool // an Add of a processing item is lost
	readyWhileBusy bool // an Add of a processing item makes it ready at once
	noDrainWait    bool // ShutDownWithDrain does not wait
}

// sketch is a deliberately simple queue with optional defects.
type sketch struct {
	bugs
	mu         sync.Mutex
	cond       *sync.Cond
	queue      []string
	dirty      map[string]bool
	processing map[string]bool
	shutdown   bool
}

func newSketch(b bugs) workqueue.Interface[string] {
	s := &sketch{bugs: b, dirty: map[string]bool{}, processing: map[string]bool{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *sketch) Add(item string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return
	}
	if s.dirty[item] && !s.noDedup {
		return
	}
	if s.processing[item] {
		if s.dropWhileBusy {
			return
		}
		if !s.readyWhileBusy {
			s.dirty[item] = true
			return
		}
	}
	s.dirty[item] = true
	s.queue = append(s.queue, item)
	s.cond.Broadcast()
}

func (s *sketch) Get() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.shutdown {
		s.cond.Wait()
	}
	if len(s.queue) == 0 {
		return "", false
	}
	item := s.queue[0]
	s.queue = s.queue[1:]
	s.processing[item] = true
	delete(s.dirty, item)
	return item, true
}

func (s *sketch) Done(item string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.processing, item)
	if s.dirty[item] && !s.readyWhileBusy {
		s.queue = append(s.queue, item)
	}
	s.cond.Broadcast()
}

func (s *sketch) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *sketch) ShutDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdown = true
	s.cond.Broadcast()
}

func (s *sketch) ShutDownWithDrain() {
	s.ShutDown()
	if s.noDrainWait {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.processing) > 0 {
		s.cond.Wait()
	}
}

func (s *sketch) ShuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdown
}

func TestKitCatchesDefects(t *testing.T) {
	tests := []struct {
		name string
		bugs bugs
		// Each rule must appear in the Check error and the Stress error.
		checkRule, stressRule string
	}{
		{"correct sketch", bugs{}, "", ""},
		{"no dedup", bugs{noDedup: true}, "collapse", "dup"},
		{"add while processing lost", bugs{dropWhileBusy: true}, "re-queues after Done", "lost item"},
		{"add while processing hands out twice", bugs{readyWhileBusy: true}, "not handed out again", "concurrent processing"},
		{"drain does not wait", bugs{noDrainWait: true}, "ShutDownWithDrain", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newQueue := func() workqueue.Interface[string] { return newSketch(tt.bugs) }
			err := queuetest.Check(newQueue)
			switch {
			case tt.checkRule == "" && err != nil:
				t.Errorf("Check: unexpected violations: %v", err)
			case tt.checkRule != "" && (err == nil || !strings.Contains(err.Error(), tt.checkRule)):
				t.Errorf("Check = %v, want a violation of %q", err, tt.checkRule)
			}
			if tt.stressRule == "" && tt.checkRule != "" {
				return // a defect the random test is not expected to hit every time
			}
			res, err := queuetest.Stress(newQueue, queuetest.StressOptions{Sequences: 20_000})
			switch {
			case tt.stressRule == "" && err != nil:
				t.Errorf("Stress: unexpected violations: %v", err)
			case tt.stressRule != "" && (err == nil || !strings.Contains(err.Error(), tt.stressRule)):
				t.Errorf("Stress = %v, want a violation of %q", err, tt.stressRule)
			}
			if tt.stressRule != "" && res.Violations == 0 {
				t.Errorf("Stress counted no violations")
			}
		})
	}
}

// ignoresPriority is a Queue whose priority methods drop the priority.
type ignoresPriority struct{ *workqueue.Queue[string] }

func (q ignoresPriority) AddWithPriority(item string, _ int) { q.Add(item) }

// delayLosesPriority is a Queue whose delayed adds drop the priority.
type delayLosesPriority struct{ *workqueue.Queue[string] }

func (q delayLosesPriority) AddAfterWithPriority(item string, d time.Duration, _ int) {
	q.AddAfter(item, d)
}

func TestPriorityKitCatchesDefects(t *testing.T) {
	tests := []struct {
		name string
		wrap func(*workqueue.Queue[string]) workqueue.PriorityInterface[string]
		rule string
	}{
		{"correct", func(q *workqueue.Queue[string]) workqueue.PriorityInterface[string] { return q }, ""},
		{"priorities ignored", func(q *workqueue.Queue[string]) workqueue.PriorityInterface[string] { return ignoresPriority{q} }, "higher priority first"},
		{"delays lose priority", func(q *workqueue.Queue[string]) workqueue.PriorityInterface[string] { return delayLosesPriority{q} }, "a delayed item keeps its priority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				err := queuetest.CheckPriority(func() (workqueue.PriorityInterface[string], func(time.Duration)) {
					return tt.wrap(workqueue.New(workqueue.Options[string]{})), func(d time.Duration) {
						time.Sleep(d)
						synctest.Wait()
					}
				})
				switch {
				case tt.rule == "" && err != nil:
					t.Errorf("CheckPriority: unexpected violations: %v", err)
				case tt.rule != "" && (err == nil || !strings.Contains(err.Error(), tt.rule)):
					t.Errorf("CheckPriority = %v, want a violation of %q", err, tt.rule)
				}
			})
		})
	}
}
