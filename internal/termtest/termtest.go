//go:build unix

// Package termtest gives tests a pseudo-terminal: a terminal for a
// program under test to read from and prompt on, and a typist on the other
// side that answers its prompts.
package termtest

import (
	"bufio"
	"bytes"
	"os"
	"testing"

	"github.com/creack/pty"
)

// Terminal is a pseudo-terminal opened for one test.
type Terminal struct {
	// TTY is the terminal side: give it to a program as its standard
	// input (and standard error, for its prompts).
	TTY *os.File

	ptmx  *os.File
	typed chan struct{}
}

// Open opens a pseudo-terminal whose typist types answer each time the
// terminal shows prompt. Both sides are closed when the test ends.
func Open(t testing.TB, prompt, answer string) *Terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	term := &Terminal{TTY: tty, ptmx: ptmx, typed: make(chan struct{})}
	go term.typist(prompt, answer)
	t.Cleanup(func() {
		tty.Close()
		ptmx.Close()
		<-term.typed
	})
	return term
}

// typist reads what the terminal shows and answers each prompt, until the
// terminal is closed.
func (term *Terminal) typist(prompt, answer string) {
	defer close(term.typed)
	r := bufio.NewReader(term.ptmx)
	var seen bytes.Buffer
	for {
		b, err := r.ReadByte()
		if err != nil {
			return
		}
		seen.WriteByte(b)
		if bytes.HasSuffix(seen.Bytes(), []byte(prompt)) {
			seen.Reset()
			term.ptmx.WriteString(answer)
		}
	}
}
