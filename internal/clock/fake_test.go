package clock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFake(t *testing.T) {
	tests := []struct {
		name string
		run  func(f *clock.Fake, log func(string)) // arms timers, steps
		want []string
	}{
		{"timers fire in deadline order, ties in arming order", func(f *clock.Fake, log func(string)) {
			f.AfterFunc(3*time.Second, func() { log("c") })
			f.AfterFunc(time.Second, func() { log("a") })
			f.AfterFunc(3*time.Second, func() { log("d") })
			f.AfterFunc(2*time.Second, func() { log("b") })
			f.Step(time.Second)
			log("|")
			f.Step(5 * time.Second)
		}, []string{"a", "|", "b", "c", "d"}},
		{"a callback sees the time of its deadline and can re-arm", func(f *clock.Fake, log func(string)) {
			var tm clock.Timer
			n := 0
			tm = f.AfterFunc(time.Second, func() {
				n++
				log(f.Now().Sub(epoch).String())
				if n < 3 {
					tm.Reset(time.Second)
				}
			})
			f.Step(10 * time.Second)
			log(f.Now().Sub(epoch).String())
		}, []string{"1s", "2s", "3s", "10s"}},
		{"stop and reset", func(f *clock.Fake, log func(string)) {
			a := f.AfterFunc(time.Second, func() { log("a") })
			b := f.AfterFunc(time.Second, func() { log("b") })
			if !a.Stop() || a.Stop() {
				log("bad stop")
			}
			if !b.Reset(5 * time.Second) {
				log("bad reset")
			}
			f.Step(4 * time.Second)
			log("|")
			f.Step(time.Second)
		}, []string{"|", "b"}},
		{"channel timers", func(f *clock.Fake, log func(string)) {
			tm := f.NewTimer(time.Second)
			f.Step(time.Second)
			select {
			case at := <-tm.C():
				log(at.Sub(epoch).String())
			default:
				log("not fired")
			}
			tm.Reset(time.Second)
			f.Step(time.Second)
			tm.Stop() // drains
			select {
			case <-tm.C():
				log("stale value")
			default:
				log("empty")
			}
		}, []string{"1s", "empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			var got []string
			tt.run(f, func(s string) { got = append(got, s) })
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			if n := f.Waiters(); n != 0 {
				t.Fatalf("Waiters = %d after the test, want 0", n)
			}
		})
	}
}

func TestRealAndOrReal(t *testing.T) {
	if _, ok := clock.OrReal(nil).(clock.Real); !ok {
		t.Fatal("OrReal(nil) is not Real")
	}
	f := clock.NewFake(epoch)
	if clock.OrReal(f) != clock.Clock(f) {
		t.Fatal("OrReal(f) is not f")
	}
	fired := make(chan struct{})
	clock.Real{}.AfterFunc(0, func() { close(fired) })
	<-fired
	tm := clock.Real{}.NewTimer(0)
	<-tm.C()
}
