package discovery

import (
	"github.com/loom-k8s/loom/rest"

	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/internal/clock"
)

// Mapping says where objects of a kind live.
type Mapping struct {
	// Resource is the group, version and plural resource name (the URL path).
	Resource schema.GroupVersionResource
	// Kind is the group, version and kind of the objects.
	Kind schema.GroupVersionKind
	// Namespaced is true for namespaced resources, false for cluster-scoped.
	Namespaced bool
}

// MapperOptions configure [NewMapper]. The zero value is valid.
type MapperOptions struct {
	// MinRefreshInterval is the least time between two refreshes caused by
	// unknown names, so that a typo repeated in a loop does not become a
	// stream of discovery requests. Zero means one second.
	MinRefreshInterval time.Duration

	clock clock.Clock // tests only
}

// Invalidator is implemented by discoverers that cache, such as *Cached.
type Invalidator interface{ Invalidate() }

// Mapper maps between kinds and resources, and resolves the partial names
// that kubectl users type. It takes its snapshot lazily from a Discoverer,
// and takes a new one (after invalidating a cache) when asked for a name it
// does not know, at most once per MinRefreshInterval. It is safe for
// concurrent use.
type Mapper struct {
	src   Discoverer
	opts  MapperOptions
	clock clock.Clock

	mu        sync.Mutex
	idx       *index
	refreshed time.Time
}

// NewMapper returns a Mapper over src. Wrap a *Client in [NewCached] so that
// lookups do not each cost a discovery.
func NewMapper(src Discoverer, opts MapperOptions) *Mapper {
	if opts.MinRefreshInterval <= 0 {
		opts.MinRefreshInterval = time.Second
	}
	return &Mapper{src: src, opts: opts, clock: clock.OrReal(opts.clock)}
}

// MapperFor returns a Mapper over rc's discovery, cached in memory: what
// a client of custom types needs (client.Options.Mapper), in one call.
func MapperFor(rc *rest.Client) *Mapper {
	return NewMapper(NewCached(New(rc, Options{}), CacheOptions{}), MapperOptions{})
}

// entry is one resource at one version.
type entry struct {
	Mapping
	singular   string
	shortNames []string
	categories []string
	preferred  bool // the version chosen for this group resource (see Snapshot.PreferredResources)
}

// index holds a snapshot's resources in priority order: groups in the
// server's order, versions in the group's order.
type index struct {
	entries []entry
}

func newIndex(s *Snapshot) *index {
	idx := &index{}
	preferred := map[schema.GroupVersionResource]bool{}
	for _, l := range s.PreferredResources() {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			preferred[gv.WithResource(r.Name)] = true
		}
	}
	for _, l := range s.ResourceLists() {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			kind := gv.WithKind(r.Kind)
			if r.Version != "" {
				kind.Group, kind.Version = r.Group, r.Version
			}
			singular := r.SingularName
			if singular == "" {
				singular = strings.ToLower(r.Kind)
			}
			gvr := gv.WithResource(r.Name)
			idx.entries = append(idx.entries, entry{
				Mapping:    Mapping{Resource: gvr, Kind: kind, Namespaced: r.Namespaced},
				singular:   singular,
				shortNames: r.ShortNames,
				categories: r.Categories,
				preferred:  preferred[gvr],
			})
		}
	}
	return idx
}

// lookup runs find on the current index, refreshing it once if find fails.
func (m *Mapper) lookup(ctx context.Context, find func(*index) (Mapping, bool)) (Mapping, bool, error) {
	m.mu.Lock()
	idx := m.idx
	m.mu.Unlock()
	if idx == nil {
		var err error
		if idx, err = m.load(ctx, false); err != nil {
			return Mapping{}, false, err
		}
	}
	if mp, ok := find(idx); ok {
		return mp, true, nil
	}
	m.mu.Lock()
	stale := m.clock.Now().Sub(m.refreshed) >= m.opts.MinRefreshInterval
	m.mu.Unlock()
	if !stale {
		return Mapping{}, false, nil
	}
	idx, err := m.load(ctx, true)
	if err != nil {
		return Mapping{}, false, err
	}
	mp, ok := find(idx)
	return mp, ok, nil
}

// load takes a snapshot (invalidating a cache first if refresh) and indexes
// it. A partial snapshot is used for what it has.
func (m *Mapper) load(ctx context.Context, refresh bool) (*index, error) {
	if inv, ok := m.src.(Invalidator); ok && refresh {
		inv.Invalidate()
	}
	s, err := m.src.Discover(ctx)
	if err != nil {
		return nil, err
	}
	idx := newIndex(s)
	m.mu.Lock()
	m.idx, m.refreshed = idx, m.clock.Now()
	m.mu.Unlock()
	return idx, nil
}

// Reset forgets the index; the next lookup takes a new snapshot.
func (m *Mapper) Reset() {
	m.mu.Lock()
	m.idx = nil
	m.mu.Unlock()
}

// RESTMapping returns where objects of group kind gk live, at the first of
// versions that serves it, or at the preferred version when versions is
// empty. An unknown kind is a *meta.NoKindMatchError (meta.IsNoMatchError).
func (m *Mapper) RESTMapping(ctx context.Context, gk schema.GroupKind, versions ...string) (Mapping, error) {
	mp, ok, err := m.lookup(ctx, func(idx *index) (Mapping, bool) {
		if len(versions) == 0 {
			return idx.find(func(e *entry) bool { return e.preferred && e.Kind.GroupKind() == gk })
		}
		for _, v := range versions {
			if mp, ok := idx.find(func(e *entry) bool { return e.Kind.GroupKind() == gk && e.Kind.Version == v }); ok {
				return mp, true
			}
		}
		return Mapping{}, false
	})
	if err != nil {
		return Mapping{}, err
	}
	if !ok {
		return Mapping{}, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return mp, nil
}

// ResourceFor resolves a name as kubectl does: "pods", "pod", "po", "Pod",
// "deployments.apps", "deploy.apps", "deployment.v1.apps". Where several
// groups serve the name, the first group in the server's order wins (the
// core group first); within a group, the preferred version. An unknown
// name is a *meta.NoResourceMatchError (meta.IsNoMatchError).
func (m *Mapper) ResourceFor(ctx context.Context, name string) (Mapping, error) {
	name = strings.ToLower(name)
	parts := strings.Split(name, ".")
	mp, ok, err := m.lookup(ctx, func(idx *index) (Mapping, bool) {
		// resource.version.group, when the version part is one.
		if len(parts) >= 3 {
			res, ver, group := parts[0], parts[1], strings.Join(parts[2:], ".")
			if mp, ok := idx.find(func(e *entry) bool {
				return e.Resource.Group == group && e.Resource.Version == ver && e.names(res)
			}); ok {
				return mp, true
			}
		}
		// resource.group, or a bare resource.
		res, group := parts[0], strings.Join(parts[1:], ".")
		return idx.find(func(e *entry) bool {
			return e.preferred && e.Resource.Group == group && e.names(res) ||
				e.preferred && len(parts) == 1 && e.names(res)
		})
	})
	if err != nil {
		return Mapping{}, err
	}
	if !ok {
		gr := schema.ParseGroupResource(name)
		return Mapping{}, &meta.NoResourceMatchError{PartialResource: gr.WithVersion("")}
	}
	return mp, nil
}

// Category returns the resources in a category (for example "all"), each
// at its preferred version, in the server's order.
func (m *Mapper) Category(ctx context.Context, category string) ([]Mapping, error) {
	var out []Mapping
	_, _, err := m.lookup(ctx, func(idx *index) (Mapping, bool) {
		out = out[:0]
		for i := range idx.entries {
			e := &idx.entries[i]
			if !e.preferred {
				continue
			}
			for _, c := range e.categories {
				if c == category {
					out = append(out, e.Mapping)
					break
				}
			}
		}
		return Mapping{}, len(out) > 0
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &meta.NoResourceMatchError{PartialResource: schema.GroupVersionResource{Resource: category}}
	}
	return out, nil
}

// find returns the first entry, in priority order, that match accepts.
func (idx *index) find(match func(*entry) bool) (Mapping, bool) {
	for i := range idx.entries {
		if match(&idx.entries[i]) {
			return idx.entries[i].Mapping, true
		}
	}
	return Mapping{}, false
}

// names reports whether a lower-case name names e: its plural, its
// singular (or lower-case kind), or one of its short names.
func (e *entry) names(name string) bool {
	if name == e.Resource.Resource || name == e.singular || name == strings.ToLower(e.Kind.Kind) {
		return true
	}
	for _, s := range e.shortNames {
		if s == name {
			return true
		}
	}
	return false
}
