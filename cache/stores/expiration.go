package stores

import (
	"sync"
	"time"

	"github.com/loom-k8s/loom/cache"
)

// DefaultTTL is the time to live of an [ExpirationCache] whose options
// give none.
const DefaultTTL = 10 * time.Minute

// ExpirationCacheOptions configures [NewExpirationCache]. The zero value
// is valid for API object types.
type ExpirationCacheOptions[T any] struct {
	// KeyFunc files objects. Default nil: [cache.MetaNamespaceKey] when T
	// satisfies [cache.Object]; for any other T every write fails with
	// [cache.ErrNoKeyFunc].
	KeyFunc cache.KeyFunc[T]
	// TTL is how long an object stays after its last Add, Update or
	// Replace. Default zero (or negative): [DefaultTTL].
	TTL time.Duration
}

// ExpirationCache is a store whose objects expire a fixed time after they
// were last written: from then on reads do not return them. Expired
// objects are dropped when a read or write comes across them; there is no
// background goroutine.
//
// Use it to remember answers that are expensive to get and cheap to get
// wrong for a while, such as discovery results or token reviews. Loom's
// informers do not use it: their caches are kept fresh by watches.
//
// ExpirationCache reads the time with the time package. A test can make
// objects expire without waiting by using the cache in a testing/synctest
// bubble, where that time is fake and time.Sleep moves it forward at once.
//
// ExpirationCache is safe for concurrent use. Objects are shared and must
// not be mutated. The zero value is not usable; call
// [NewExpirationCache].
type ExpirationCache[T any] struct {
	keyFunc cache.KeyFunc[T]
	ttl     time.Duration

	mu    sync.Mutex
	items map[string]expiring[T]
}

type expiring[T any] struct {
	obj     T
	expires time.Time
}

var _ cache.ReadWriter[int] = (*ExpirationCache[int])(nil)

// NewExpirationCache returns an empty ExpirationCache configured by opts.
func NewExpirationCache[T any](opts ExpirationCacheOptions[T]) *ExpirationCache[T] {
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &ExpirationCache[T]{
		keyFunc: defaultKeyFunc(opts.KeyFunc),
		ttl:     ttl,
		items:   map[string]expiring[T]{},
	}
}

// Add stores obj under its key, replacing any object there, to expire
// TTL from now. It fails with a [*cache.KeyError].
func (c *ExpirationCache[T]) Add(obj T) error {
	key, err := keyOf(c.keyFunc, obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items[key] = expiring[T]{obj: obj, expires: time.Now().Add(c.ttl)}
	return nil
}

// Update is Add.
func (c *ExpirationCache[T]) Update(obj T) error { return c.Add(obj) }

// Delete removes the object with obj's key, if any. It fails with a
// [*cache.KeyError].
func (c *ExpirationCache[T]) Delete(obj T) error {
	key, err := keyOf(c.keyFunc, obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.items, key)
	return nil
}

// Replace makes the cache hold exactly objs, all to expire TTL from now.
// It fails, changing nothing, with a [*cache.KeyError].
func (c *ExpirationCache[T]) Replace(objs []T) error {
	items := make(map[string]expiring[T], len(objs))
	expires := time.Now().Add(c.ttl)
	for _, obj := range objs {
		key, err := keyOf(c.keyFunc, obj)
		if err != nil {
			return err
		}
		items[key] = expiring[T]{obj: obj, expires: expires}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = items
	return nil
}

// expire drops the expired objects. The caller holds mu.
func (c *ExpirationCache[T]) expire() {
	now := time.Now()
	for key, it := range c.items {
		if !now.Before(it.expires) {
			delete(c.items, key)
		}
	}
}

// Get returns the object stored under key if it has not expired.
func (c *ExpirationCache[T]) Get(key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.items[key]
	if ok && !time.Now().Before(it.expires) {
		delete(c.items, key)
		ok = false
	}
	if !ok {
		var zero T
		return zero, false
	}
	return it.obj, true
}

// List returns the objects that have not expired, in no particular
// order.
func (c *ExpirationCache[T]) List() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
	out := make([]T, 0, len(c.items))
	for _, it := range c.items {
		out = append(out, it.obj)
	}
	return out
}

// ListKeys returns the keys of the objects that have not expired, in no
// particular order.
func (c *ExpirationCache[T]) ListKeys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
	out := make([]string, 0, len(c.items))
	for key := range c.items {
		out = append(out, key)
	}
	return out
}

// Len returns the number of objects that have not expired.
func (c *ExpirationCache[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
	return len(c.items)
}
