package intern

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func TestStrings(t *testing.T) {
	var s Strings
	in := []byte("kube-system")
	a, found := s.Get(in)
	if a != "kube-system" || found {
		t.Fatalf("first Get = %q, %v; want a new copy", a, found)
	}
	in[0] = 'X' // Get copied its input
	if a != "kube-system" {
		t.Fatalf("the string changed with Get's input: %q", a)
	}
	b, found := s.Get([]byte("kube-system"))
	if !found || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatalf("second Get: found %v, same bytes %v", found, unsafe.StringData(a) == unsafe.StringData(b))
	}
	if n := testing.AllocsPerRun(100, func() { s.Get([]byte("kube-system")) }); n != 0 {
		t.Errorf("a string found costs %v allocations", n)
	}

	// More strings than slots: every answer is still the string asked
	// for, whichever slots they fight over.
	var got []string
	for i := range 2 * stringSlots {
		str, _ := s.Get(fmt.Appendf(nil, "value-%d", i))
		got = append(got, str)
	}
	for i, str := range got {
		if want := fmt.Sprintf("value-%d", i); str != want {
			t.Fatalf("Get(%q) = %q", want, str)
		}
	}
}

// A string lives as long as what holds it, and no longer: the slot does
// not keep it.
func TestStringsDie(t *testing.T) {
	var s Strings
	key := []byte("a string nobody keeps")
	s.Get(key)
	for i := 0; ; i++ {
		runtime.GC()
		if _, found := s.Get(key); !found {
			return
		}
		if i == 100 {
			t.Fatal("a string that nothing holds is still found after 100 GCs")
		}
	}
}

// inUse counts the slots that hold an entry.
func (s *Strings) inUse() int {
	n := 0
	for i := range s.slots {
		if s.slots[i].Load() != nil {
			n++
		}
	}
	return n
}

// Once their strings are collected, the slots are emptied, so their
// entries go too; a slot whose string is alive keeps it; and a Strings
// that nothing holds is collected, its sweep with it.
func TestStringsSweep(t *testing.T) {
	s := new(Strings)
	kept, _ := s.Get([]byte("a string someone keeps"))
	for i := range 1000 {
		s.Get(fmt.Appendf(nil, "dropped-%d", i))
	}
	if n := s.inUse(); n < 900 {
		t.Fatalf("%d slots in use after 1001 strings", n)
	}
	// Cleanups run on a goroutine of their own after a collection: wait
	// for them, collecting again, within a generous bound.
	deadline := time.Now().Add(time.Minute)
	for s.inUse() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots still in use after a minute of GCs; want 1, the kept string's", s.inUse())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got, found := s.Get([]byte("a string someone keeps")); !found || unsafe.StringData(got) != unsafe.StringData(kept) {
		t.Fatal("the sweep emptied the slot of a string that is alive")
	}

	collected := make(chan struct{})
	runtime.AddCleanup(s, func(ch chan struct{}) { close(ch) }, collected)
	s = nil
	deadline = time.Now().Add(time.Minute)
	for {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("a Strings that nothing holds is still alive after a minute of GCs: its sweep keeps it")
		}
	}
}

func TestStringsConcurrent(t *testing.T) {
	var s Strings
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				want := fmt.Sprintf("v%d", (i+g)%50)
				if got, _ := s.Get([]byte(want)); got != want {
					t.Errorf("Get(%q) = %q", want, got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A field whose strings are mostly unique stops being looked up after the
// warmup; one whose strings repeat goes on.
func TestOptionsString(t *testing.T) {
	o := Options{Strings: new(Strings), Stats: &Stats{}}
	unique, repeated := NewField(), NewField()
	for i := range 2 * stringWarmup {
		_, uok := o.String(unique, fmt.Appendf(nil, "uid-%d", i))
		_, rok := o.String(repeated, fmt.Appendf(nil, "ns-%d", i%3))
		if i < stringWarmup && !uok || !rok {
			t.Fatalf("lookup %d: unique looked up %v, repeated %v", i, uok, rok)
		}
		if i >= stringWarmup && uok {
			t.Fatalf("lookup %d: unique strings still looked up after the warmup", i)
		}
	}
	for _, b := range [][]byte{nil, make([]byte, MaxInterned+1)} {
		if _, ok := o.String(repeated, b); ok {
			t.Errorf("a string of %d bytes was looked up", len(b))
		}
	}
	if _, ok := (&Options{}).String(repeated, []byte("x")); ok {
		t.Error("looked up without Strings")
	}
}

// An interface from Boxed shares the string's box, costs no allocation
// once the string is held, and keeps the string alive by itself through
// garbage collections, with nothing else holding it.
func TestStringsBoxed(t *testing.T) {
	var s Strings
	data := func(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).data }
	a, found := s.Boxed([]byte("Available"))
	if a != "Available" || found {
		t.Fatalf("first Boxed = %v, %v", a, found)
	}
	b, found := s.Boxed([]byte("Available"))
	if !found || data(a) != data(b) {
		t.Fatalf("second Boxed: found %v, same box %v", found, data(a) == data(b))
	}
	if str, _ := s.Get([]byte("Available")); unsafe.StringData(str) != unsafe.StringData(a.(string)) {
		t.Error("Get and Boxed hold two copies")
	}
	if n := testing.AllocsPerRun(100, func() { s.Boxed([]byte("Available")) }); n != 0 {
		t.Errorf("a boxed string found costs %v allocations", n)
	}

	var held []any
	for i := range 1000 {
		v, _ := s.Boxed(fmt.Appendf(nil, "held-%d", i))
		held = append(held, v)
	}
	s = Strings{} // nothing but the interfaces holds the strings now
	for range 3 {
		runtime.GC()
		for range 1000 { // reuse what was freed, if anything was
			_ = fmt.Appendf(make([]byte, 0, 32), "garbage-%d", 12345)
		}
	}
	for i, v := range held {
		if want := fmt.Sprintf("held-%d", i); v != want {
			t.Fatalf("held %d is %q after GCs, want %q", i, v, want)
		}
	}
}
