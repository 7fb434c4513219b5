package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/internal/clock"
)

// CacheOptions configure [NewCached]. The zero value caches in memory for
// six hours.
type CacheOptions struct {
	// TTL is how long a complete snapshot is used before it is taken again.
	// Zero means six hours, as kubectl. The Mapper invalidates early when it
	// meets a name it does not know, so a long TTL does not hide new CRDs.
	TTL time.Duration
	// PartialTTL is how long a snapshot with failed group versions is used,
	// so a recovered aggregated API is seen soon. Zero means 30 seconds.
	// Partial snapshots are never written to disk.
	PartialTTL time.Duration
	// Dir, when set, keeps complete snapshots on disk in this folder (one
	// server per folder; see [DefaultCacheDir]), so that short-lived
	// programs such as a CLI skip discovery. Empty means memory only.
	Dir string

	clock clock.Clock // tests only; nil means the real clock
}

// Cached is a [Discoverer] that reuses a snapshot until its TTL passes or
// Invalidate is called. It is safe for concurrent use; concurrent callers
// that find no valid snapshot share one Discover call.
type Cached struct {
	src   Discoverer
	opts  CacheOptions
	clock clock.Clock

	mu      sync.Mutex
	snap    *Snapshot
	expires time.Time
	flight  *flight
}

type flight struct {
	done chan struct{}
	snap *Snapshot
	err  error
}

// NewCached wraps src with a cache.
func NewCached(src Discoverer, opts CacheOptions) *Cached {
	if opts.TTL <= 0 {
		opts.TTL = 6 * time.Hour
	}
	if opts.PartialTTL <= 0 {
		opts.PartialTTL = 30 * time.Second
	}
	return &Cached{src: src, opts: opts, clock: clock.OrReal(opts.clock)}
}

// DefaultCacheDir is the on-disk cache folder for the server at host:
// ${XDG_CACHE_HOME:-~/.cache}/loom/discovery/<host with unsafe characters
// replaced>.
func DefaultCacheDir(host string) string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		if home, err := os.UserHomeDir(); err == nil {
			base = filepath.Join(home, ".cache")
		} else {
			base = os.TempDir()
		}
	}
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			return r
		}
		return '_'
	}, strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://"))
	return filepath.Join(base, "loom", "discovery", safe)
}

// Invalidate drops the cached snapshot, in memory and on disk.
func (c *Cached) Invalidate() {
	c.mu.Lock()
	c.snap = nil
	c.mu.Unlock()
	if c.opts.Dir != "" {
		_ = os.Remove(c.diskPath())
	}
}

// Discover returns the cached snapshot while it is valid, else takes a new
// one from the source.
func (c *Cached) Discover(ctx context.Context) (*Snapshot, error) {
	c.mu.Lock()
	now := c.clock.Now()
	if c.snap != nil && now.Before(c.expires) {
		s := c.snap
		c.mu.Unlock()
		return s, nil
	}
	if c.snap == nil && c.opts.Dir != "" {
		if s, exp, err := c.readDisk(now); err == nil {
			c.snap, c.expires = s, exp
			c.mu.Unlock()
			return s, nil
		}
	}
	f := c.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flight = f
		c.mu.Unlock()
		f.snap, f.err = c.src.Discover(ctx)
		c.mu.Lock()
		c.flight = nil
		if f.err == nil {
			ttl := c.opts.TTL
			if len(f.snap.Failed) > 0 {
				ttl = c.opts.PartialTTL
			}
			c.snap, c.expires = f.snap, c.clock.Now().Add(ttl)
		}
		c.mu.Unlock()
		close(f.done)
		if f.err == nil && len(f.snap.Failed) == 0 && c.opts.Dir != "" {
			_ = c.writeDisk(f.snap) // the cache is an optimisation: a write failure is not the caller's
		}
		return f.snap, f.err
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.snap, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ServerGroups is [Client.ServerGroups] through the cache.
func (c *Cached) ServerGroups(ctx context.Context) (*metav1.APIGroupList, error) {
	return serverGroups(ctx, c)
}

// ServerGroupsAndResources is [Client.ServerGroupsAndResources] through the cache.
func (c *Cached) ServerGroupsAndResources(ctx context.Context) ([]metav1.APIGroup, []*metav1.APIResourceList, error) {
	return serverGroupsAndResources(ctx, c)
}

// ServerPreferredResources is [Client.ServerPreferredResources] through the cache.
func (c *Cached) ServerPreferredResources(ctx context.Context) ([]*metav1.APIResourceList, error) {
	return serverPreferredResources(ctx, c)
}

// diskSnapshot is the on-disk form of a complete snapshot.
type diskSnapshot struct {
	Taken      time.Time                 `json:"taken"`
	Aggregated bool                      `json:"aggregated"`
	Groups     []metav1.APIGroup         `json:"groups"`
	Resources  []*metav1.APIResourceList `json:"resources"`
}

func (c *Cached) diskPath() string { return filepath.Join(c.opts.Dir, "snapshot.json") }

func (c *Cached) readDisk(now time.Time) (*Snapshot, time.Time, error) {
	b, err := os.ReadFile(c.diskPath())
	if err != nil {
		return nil, time.Time{}, err
	}
	var d diskSnapshot
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, time.Time{}, err
	}
	exp := d.Taken.Add(c.opts.TTL)
	if !now.Before(exp) {
		return nil, time.Time{}, fmt.Errorf("expired")
	}
	s := &Snapshot{Groups: d.Groups, Resources: map[schema.GroupVersion]*metav1.APIResourceList{}, Failed: map[schema.GroupVersion]error{}, Aggregated: d.Aggregated}
	for _, l := range d.Resources {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, time.Time{}, err
		}
		s.Resources[gv] = l
	}
	return s, exp, nil
}

func (c *Cached) writeDisk(s *Snapshot) error {
	if err := os.MkdirAll(c.opts.Dir, 0o750); err != nil {
		return err
	}
	b, err := json.Marshal(diskSnapshot{Taken: c.clock.Now(), Aggregated: s.Aggregated, Groups: s.Groups, Resources: s.ResourceLists()})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.opts.Dir, ".snapshot-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), c.diskPath())
}
