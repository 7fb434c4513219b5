package workqueue

// ring is a FIFO of T over a power-of-two circular buffer. It grows by
// doubling and never shrinks, so a queue in steady state does not
// allocate. The zero value is an empty ring. Not safe for concurrent use.
type ring[T any] struct {
	buf  []T
	head int // index of the oldest element
	n    int // number of elements
}

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// pop removes and returns the oldest element. The ring must not be empty.
func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero // drop the reference for the garbage collector
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

func (r *ring[T]) grow() {
	size := 2 * len(r.buf)
	if size == 0 {
		size = 16
	}
	buf := make([]T, size)
	// Copy the two halves of the wrapped buffer in order.
	k := copy(buf, r.buf[r.head:])
	copy(buf[k:], r.buf[:r.head])
	r.buf, r.head = buf, 0
}
