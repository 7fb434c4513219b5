package rest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// frames reads a response body through one reused buffer, a frame at a
// time: the events of a watch, or the items of a list. A frame is a slice
// of the buffer, valid until the next read.
type frames struct {
	src    io.Reader
	buf    []byte
	r, w   int   // unread data is buf[r:w]
	offset int64 // stream offset of buf[r]
	max    int   // the largest frame accepted
}

// fill reads more data into the buffer, growing it so that at least need
// unread bytes fit. It returns io.EOF only when no data was read.
func (f *frames) fill(need int) error {
	if f.r > 0 && (f.r == f.w || len(f.buf)-f.r < need) {
		n := copy(f.buf, f.buf[f.r:f.w])
		f.r, f.w = 0, n
	}
	if need > len(f.buf) {
		size := max(2*len(f.buf), need, 32<<10)
		nb := make([]byte, size)
		copy(nb, f.buf[f.r:f.w])
		f.w -= f.r
		f.r = 0
		f.buf = nb
	}
	if f.w == len(f.buf) {
		return nil
	}
	n, err := f.src.Read(f.buf[f.w:])
	f.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		return nil
	}
	return err
}

// eofErr turns EOF in the middle of a frame into a DecodeError.
func (f *frames) eofErr(err error, partial int) error {
	if errors.Is(err, io.EOF) && partial > 0 {
		return &DecodeError{Offset: f.offset, Err: io.ErrUnexpectedEOF}
	}
	return err
}

// take returns the next n bytes.
func (f *frames) take(n int) ([]byte, error) {
	if n > f.max || n < 0 {
		return nil, &DecodeError{Offset: f.offset, Err: fmt.Errorf("frame of %d bytes exceeds the limit of %d", n, f.max)}
	}
	for f.w-f.r < n {
		if err := f.fill(n); err != nil {
			return nil, f.eofErr(err, 1)
		}
	}
	b := f.buf[f.r : f.r+n]
	f.r += n
	f.offset += int64(n)
	return b, nil
}

// discard skips the next n bytes, however many that is.
func (f *frames) discard(n uint64) error {
	for n > 0 {
		if f.r == f.w {
			if err := f.fill(1); err != nil {
				return f.eofErr(err, 1)
			}
		}
		k := int(min(n, uint64(f.w-f.r)))
		f.r += k
		f.offset += int64(k)
		n -= uint64(k)
	}
	return nil
}

// uvarint reads a protobuf varint. At the very end of the stream it
// returns io.EOF.
func (f *frames) uvarint() (uint64, error) {
	var x uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if f.r == f.w {
			if err := f.fill(1); err != nil {
				return 0, f.eofErr(err, i)
			}
		}
		c := f.buf[f.r]
		f.r++
		f.offset++
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, nil
		}
	}
	return 0, &DecodeError{Offset: f.offset, Err: errors.New("malformed varint")}
}

// protoFrame returns the next frame of a protobuf watch stream: a 4-byte
// big-endian length, then that many bytes.
func (f *frames) protoFrame() ([]byte, error) {
	for f.w-f.r < 4 {
		if err := f.fill(4); err != nil {
			return nil, f.eofErr(err, f.w-f.r)
		}
	}
	n := int(binary.BigEndian.Uint32(f.buf[f.r:]))
	if n > f.max || n < 0 {
		return nil, &DecodeError{Offset: f.offset, Err: fmt.Errorf("frame of %d bytes exceeds the limit of %d", n, f.max)}
	}
	for f.w-f.r < 4+n {
		if err := f.fill(4 + n); err != nil {
			return nil, f.eofErr(err, 1)
		}
	}
	frame := f.buf[f.r+4 : f.r+4+n]
	f.r += 4 + n
	f.offset += int64(4 + n)
	return frame, nil
}

// peek skips white space and returns the next byte without consuming it.
// At the end of the stream it returns io.EOF.
func (f *frames) peek() (byte, error) {
	for {
		for f.r < f.w && isSpace(f.buf[f.r]) {
			f.r++
			f.offset++
		}
		if f.r < f.w {
			return f.buf[f.r], nil
		}
		if err := f.fill(1); err != nil {
			return 0, err
		}
	}
}

// expect consumes the next byte after white space, which must be c.
func (f *frames) expect(c byte, what string) error {
	got, err := f.peek()
	if err != nil {
		return f.eofErr(err, 1)
	}
	if got != c {
		return &DecodeError{Offset: f.offset, Err: fmt.Errorf("expected %s, got %q", what, got)}
	}
	f.r++
	f.offset++
	return nil
}

// jsonObject returns the next top-level JSON object in the stream: a
// watch event.
func (f *frames) jsonObject() ([]byte, error) {
	c, err := f.peek()
	if err != nil {
		return nil, err
	}
	if c != '{' {
		return nil, &DecodeError{Offset: f.offset, Err: fmt.Errorf("expected '{' at the start of a JSON frame, got %q", c)}
	}
	return f.jsonValue()
}

// jsonValue returns the JSON value that starts at the next byte that is
// not white space. It tracks nesting and strings only; a JSON decoder
// validates the content.
func (f *frames) jsonValue() ([]byte, error) {
	if _, err := f.peek(); err != nil {
		return nil, f.eofErr(err, 1)
	}
	var (
		depth    int
		inString bool
		escape   bool
		scalar   = f.buf[f.r] != '{' && f.buf[f.r] != '['
		i        = f.r // scan position
	)
	for {
		for ; i < f.w; i++ {
			c := f.buf[i]
			if inString {
				switch {
				case escape:
					escape = false
				case c == '\\':
					escape = true
				case c == '"':
					inString = false
					if scalar && depth == 0 {
						return f.frame(i + 1), nil
					}
				}
				continue
			}
			switch c {
			case '"':
				inString = true
			case '{', '[':
				depth++
			case '}', ']':
				if scalar {
					return f.frame(i), nil
				}
				depth--
				if depth == 0 {
					return f.frame(i + 1), nil
				}
			case ',', ' ', '\t', '\r', '\n':
				if scalar {
					return f.frame(i), nil
				}
			}
		}
		scanned := i - f.r
		if scanned >= f.max {
			return nil, &DecodeError{Offset: f.offset, Err: fmt.Errorf("JSON frame exceeds the limit of %d bytes", f.max)}
		}
		oldR := f.r
		if err := f.fill(scanned + 1); err != nil {
			if scalar && !inString && errors.Is(err, io.EOF) {
				return f.frame(i - oldR + f.r), nil // a number or literal that ends the stream
			}
			return nil, f.eofErr(err, 1)
		}
		i = i - oldR + f.r // the buffer may have moved
	}
}

// frame consumes the buffer up to end and returns it.
func (f *frames) frame(end int) []byte {
	b := f.buf[f.r:end]
	f.offset += int64(end - f.r)
	f.r = end
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }
