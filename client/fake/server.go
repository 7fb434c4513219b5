package fake

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/rest"
)

// Options configure a Server. The zero value is valid.
type Options struct {
	// CRDs are files or folders of CustomResourceDefinition manifests, as
	// crd.ReadFiles reads them, installed by New so that their custom
	// resources are served at once. Default: none.
	CRDs []string
	// Now is the clock that stamps creationTimestamp, deletionTimestamp
	// and the conditions of CRDs. Default time.Now, which is the fake
	// clock inside a testing/synctest bubble. (The times of managedFields
	// entries always come from time.Now.)
	Now func() time.Time
	// Seed seeds the random suffixes of generateName and the uids, so
	// that a test sees the same names on every run. Default 0: a random
	// seed.
	Seed uint64
	// GarbageCollection makes the Server do the garbage collector's work
	// after every write, at once: delete objects whose owners (by
	// ownerReferences) are all gone, and act on the finalizers of
	// deletes with propagationPolicy Orphan (dependents lose their owner
	// reference) and Foreground (dependents are deleted first). Default
	// false: as kube-apiserver without kube-controller-manager, owned
	// objects stay and those finalizers wait.
	GarbageCollection bool
}

// Server is a Kubernetes API server that keeps its objects in memory. It
// serves the REST API over HTTP (it is an [http.Handler]) and, without
// sockets, through [Server.Transport]. Its methods are safe for
// concurrent use.
type Server struct {
	b     *builtins
	now   func() time.Time
	proto runtime.Decoder
	gc    bool

	scaleFM *managedfields.FieldManager // autoscaling/v1 Scale's, made on first use

	mu        sync.Mutex
	rnd       *rand.Rand
	rv        int64                                       // the last resourceVersion given out
	compacted int64                                       // events at or before it are gone
	resources map[schema.GroupVersionResource]*resource   // served
	byGR      map[schema.GroupResource][]*resource        // versions of each served resource
	objects   map[schema.GroupResource]map[string]*stored // by namespace/name
	events    []event                                     // since compacted, in order
	changed   chan struct{}                               // closed and replaced on every event
	watches   map[*watchState]struct{}                    // open watches, for SendBookmarks
}

// stored is an object as kept: its JSON form, decoded.
type stored struct {
	obj map[string]any
	rv  int64
}

// event is one change, as watches see it.
type event struct {
	rv   int64
	typ  string // ADDED, MODIFIED or DELETED
	gr   schema.GroupResource
	key  string
	obj  map[string]any // the new state (the last one for DELETED)
	prev map[string]any // the state before (nil for ADDED)
}

// New returns a Server that serves the built-in resources of
// kube-apiserver (the version whose discovery and OpenAPI schemas this
// package embeds) and the CRDs of opts. The namespaces default,
// kube-system, kube-public and kube-node-lease exist.
func New(opts Options) (*Server, error) {
	b, err := loadBuiltins()
	if err != nil {
		return nil, err
	}
	s := &Server{
		b:         b,
		now:       opts.Now,
		gc:        opts.GarbageCollection,
		proto:     protobuf.NewSerializer(b.scheme, b.scheme),
		resources: map[schema.GroupVersionResource]*resource{},
		byGR:      map[schema.GroupResource][]*resource{},
		objects:   map[schema.GroupResource]map[string]*stored{},
		changed:   make(chan struct{}),
		watches:   map[*watchState]struct{}{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, r := range builtinResources(b) {
		s.serve(r)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if _, err := s.createInternal(s.lookup("", "v1", "namespaces"), "", map[string]any{"metadata": map[string]any{"name": ns}}); err != nil {
			return nil, err
		}
	}
	if len(opts.CRDs) > 0 {
		objs, err := crd.ReadFiles(opts.CRDs...)
		if err != nil {
			return nil, fmt.Errorf("fake: Options.CRDs: %w", err)
		}
		for _, o := range objs {
			if err := s.AddCRD(o); err != nil {
				return nil, fmt.Errorf("fake: Options.CRDs: %w", err)
			}
		}
	}
	return s, nil
}

// AddCRD creates a CustomResourceDefinition (apiextensions.k8s.io/v1,
// such as crd.ReadFiles returns) as a client's create would; its
// resources are served when it returns.
func (s *Server) AddCRD(crd *unstructured.Unstructured) error {
	r := s.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
	obj := deepCopy(crd.Object)
	obj["apiVersion"], obj["kind"] = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	if _, err := s.createInternal(r, "", obj); err != nil {
		return fmt.Errorf("fake: %w", err)
	}
	return nil
}

// Config returns a client configuration for the Server. It names a host
// that does not resolve: use it with [Server.Transport] (as rest.Options
// or manager.Options Transport).
func (s *Server) Config() config.Config {
	return config.Config{Host: "https://fake.loom.invalid", Namespace: "default"}
}

// REST returns a REST client that reaches the Server through
// [Server.Transport]; opts.Transport is replaced.
func (s *Server) REST(opts rest.Options) (*rest.Client, error) {
	opts.Transport = s.Transport()
	rc, err := rest.New(s.Config(), opts)
	if err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	return rc, nil
}

// ResourceVersion returns the last resourceVersion the Server gave out.
func (s *Server) ResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatInt(s.rv, 10)
}

// Compact forgets the history of changes, as etcd's compaction does (the
// Server keeps every change since the last Compact, for watches from a
// resourceVersion and exact lists):
// afterwards a watch or an exact list from an earlier resourceVersion,
// or a list continued from an earlier page, fails with 410 Gone
// (reason Expired). Open watches that have seen every change go on.
func (s *Server) Compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rv
	s.events = nil
}

// SendBookmarks makes every open watch that allows bookmarks send one,
// at the current resourceVersion, as kube-apiserver does about once a
// minute.
func (s *Server) SendBookmarks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watches {
		if w.bookmarks {
			w.bookmarkWanted = true
		}
	}
	s.notify()
}

// serve adds a resource; the caller holds mu or owns s.
func (s *Server) serve(r *resource) {
	s.resources[r.gvr] = r
	gr := r.gr()
	vs := s.byGR[gr]
	for i, o := range vs {
		if o.gvr == r.gvr {
			vs = append(vs[:i], vs[i+1:]...)
			break
		}
	}
	s.byGR[gr] = append(vs, r)
	if s.objects[gr] == nil {
		s.objects[gr] = map[string]*stored{}
	}
}

// unserve removes a resource and, with its last version, its objects.
func (s *Server) unserve(gvr schema.GroupVersionResource) {
	delete(s.resources, gvr)
	gr := gvr.GroupResource()
	vs := s.byGR[gr]
	for i, o := range vs {
		if o.gvr == gvr {
			vs = append(vs[:i], vs[i+1:]...)
			break
		}
	}
	if len(vs) == 0 {
		delete(s.byGR, gr)
		delete(s.objects, gr)
		return
	}
	s.byGR[gr] = vs
}

// servesVersion reports whether a group version has a served resource;
// the caller holds mu.
func (s *Server) servesVersion(group, version string) bool {
	for gvr := range s.resources {
		if gvr.Group == group && gvr.Version == version {
			return true
		}
	}
	return false
}

func (s *Server) lookup(group, version, res string) *resource {
	return s.resources[schema.GroupVersionResource{Group: group, Version: version, Resource: res}]
}

// record appends an event and wakes the watches; the caller holds mu.
func (s *Server) record(ev event) {
	s.events = append(s.events, ev)
	s.notify()
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextRV gives out the next resourceVersion; the caller holds mu.
func (s *Server) nextRV() int64 {
	s.rv++
	return s.rv
}

// sortedKeys returns the keys of m in the order of etcd's keys.
func sortedKeys(m map[string]*stored) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func key(ns, name string) string { return ns + "/" + name }

// ServeHTTP serves the Kubernetes REST API.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	s.serveHTTP(w, req)
}
