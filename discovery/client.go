package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/loom-k8s/loom/rest"
)

// acceptAggregated asks for aggregated discovery, and for the legacy
// documents from servers that do not have it.
const acceptAggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

// Options configure [New]. The zero value is valid.
type Options struct {
	// Legacy skips aggregated discovery and always walks /api, /apis and
	// every group version. Default false.
	Legacy bool
	// Parallelism bounds the concurrent requests of the legacy walk. Zero
	// means 8.
	Parallelism int
	// Logger receives debug messages. Nil means discard.
	Logger *slog.Logger
}

// Client discovers what an API server serves. It is safe for concurrent
// use. It caches nothing; wrap it in [Cached] for that.
type Client struct {
	rc   *rest.Client
	opts Options
	log  *slog.Logger
}

// New returns a discovery client that sends its requests through rc.
func New(rc *rest.Client, opts Options) *Client {
	if opts.Parallelism <= 0 {
		opts.Parallelism = 8
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{rc: rc, opts: opts, log: log}
}

// Discoverer takes snapshots of what a server serves. *Client and *Cached
// implement it.
type Discoverer interface {
	Discover(ctx context.Context) (*Snapshot, error)
}

// ServerVersion returns the server's /version.
func (c *Client) ServerVersion(ctx context.Context) (*version.Info, error) {
	var v version.Info
	if err := c.getJSON(ctx, "/version", "", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ServerResourcesForGroupVersion returns the resources of one group
// version, asked for directly (no snapshot). gv is "v1" for the core group,
// "group/version" otherwise.
func (c *Client) ServerResourcesForGroupVersion(ctx context.Context, gv string) (*metav1.APIResourceList, error) {
	g, err := schema.ParseGroupVersion(gv)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var l metav1.APIResourceList
	if err := c.getJSON(ctx, groupVersionPath(g), "", &l); err != nil {
		return nil, err
	}
	if l.GroupVersion == "" {
		l.GroupVersion = gv
	}
	return &l, nil
}

// Discover takes a snapshot: aggregated discovery when the server offers it
// (two requests), else the legacy walk. Failed group versions are recorded
// in the snapshot, not returned as an error; an error means nothing could be
// discovered (the server is unreachable, or refused /api or /apis).
func (c *Client) Discover(ctx context.Context) (*Snapshot, error) {
	if !c.opts.Legacy {
		s, ok, err := c.aggregated(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			return s, nil
		}
		c.log.Debug("server has no aggregated discovery; walking group versions")
	}
	return c.legacy(ctx)
}

// aggregated asks /api and /apis for aggregated discovery. ok is false when
// the server answered with the legacy documents instead.
func (c *Client) aggregated(ctx context.Context) (*Snapshot, bool, error) {
	s := &Snapshot{Resources: map[schema.GroupVersion]*metav1.APIResourceList{}, Failed: map[schema.GroupVersion]error{}, Aggregated: true}
	for _, path := range []string{"/api", "/apis"} {
		res, err := c.rc.Get().AbsPath(path).Header("Accept", acceptAggregated).DoRaw(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("discovery: %s: %w", path, err)
		}
		mt, params, _ := mime.ParseMediaType(res.ContentType)
		if mt != "application/json" || params["g"] != "apidiscovery.k8s.io" || params["v"] != "v2" {
			return nil, false, nil
		}
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(res.Body, &list); err != nil {
			return nil, false, fmt.Errorf("discovery: %s: decoding aggregated discovery: %w", path, err)
		}
		for _, g := range list.Items {
			addAggregatedGroup(s, &g)
		}
	}
	return s, true, nil
}

// addAggregatedGroup converts one aggregated group into the snapshot's
// legacy shapes.
func addAggregatedGroup(s *Snapshot, g *apidiscoveryv2.APIGroupDiscovery) {
	group := metav1.APIGroup{Name: g.Name}
	for _, v := range g.Versions {
		gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v.Version}
		group.Versions = append(group.Versions, gvd)
		if v.Freshness == apidiscoveryv2.DiscoveryFreshnessStale {
			s.Failed[gv] = errors.New("stale discovery information: the API server behind this group did not answer")
			continue
		}
		l := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
		for _, r := range v.Resources {
			ar := metav1.APIResource{
				Name:         r.Resource,
				SingularName: r.SingularResource,
				Namespaced:   r.Scope == apidiscoveryv2.ScopeNamespace,
				Verbs:        metav1.Verbs(r.Verbs),
				ShortNames:   r.ShortNames,
				Categories:   r.Categories,
			}
			if r.ResponseKind != nil {
				ar.Group, ar.Version, ar.Kind = r.ResponseKind.Group, r.ResponseKind.Version, r.ResponseKind.Kind
			}
			l.APIResources = append(l.APIResources, ar)
			for _, sub := range r.Subresources {
				sr := metav1.APIResource{
					Name:       r.Resource + "/" + sub.Subresource,
					Namespaced: ar.Namespaced,
					Verbs:      metav1.Verbs(sub.Verbs),
				}
				if sub.ResponseKind != nil {
					sr.Group, sr.Version, sr.Kind = sub.ResponseKind.Group, sub.ResponseKind.Version, sub.ResponseKind.Kind
				}
				l.APIResources = append(l.APIResources, sr)
			}
		}
		s.Resources[gv] = l
	}
	if len(group.Versions) > 0 {
		group.PreferredVersion = group.Versions[0]
	}
	s.Groups = append(s.Groups, group)
}

// legacy walks /api, /apis and every group version.
func (c *Client) legacy(ctx context.Context) (*Snapshot, error) {
	s := &Snapshot{Resources: map[schema.GroupVersion]*metav1.APIResourceList{}, Failed: map[schema.GroupVersion]error{}}
	var core metav1.APIVersions
	if err := c.getJSON(ctx, "/api", "application/json", &core); err != nil {
		return nil, err
	}
	if len(core.Versions) > 0 {
		g := metav1.APIGroup{Name: ""}
		for _, v := range core.Versions {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v})
		}
		g.PreferredVersion = g.Versions[0]
		s.Groups = append(s.Groups, g)
	}
	var groups metav1.APIGroupList
	if err := c.getJSON(ctx, "/apis", "application/json", &groups); err != nil {
		return nil, err
	}
	s.Groups = append(s.Groups, groups.Groups...)

	type result struct {
		gv   schema.GroupVersion
		list *metav1.APIResourceList
		err  error
	}
	var gvs []schema.GroupVersion
	for _, g := range s.Groups {
		for _, v := range g.Versions {
			gvs = append(gvs, schema.GroupVersion{Group: g.Name, Version: v.Version})
		}
	}
	results := make([]result, len(gvs))
	sem := make(chan struct{}, c.opts.Parallelism)
	var wg sync.WaitGroup
	for i, gv := range gvs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			l, err := c.ServerResourcesForGroupVersion(ctx, gv.String())
			results[i] = result{gv, l, err}
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.err != nil {
			s.Failed[r.gv] = r.err
			continue
		}
		s.Resources[r.gv] = r.list
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// ServerGroups returns the groups the server serves.
func (c *Client) ServerGroups(ctx context.Context) (*metav1.APIGroupList, error) {
	return serverGroups(ctx, c)
}

// ServerGroupsAndResources returns the groups and the resources of every
// group version. If some group versions failed, it returns what it has
// and a *GroupDiscoveryFailedError.
func (c *Client) ServerGroupsAndResources(ctx context.Context) ([]metav1.APIGroup, []*metav1.APIResourceList, error) {
	return serverGroupsAndResources(ctx, c)
}

// ServerPreferredResources returns each resource at its preferred version
// (see [Snapshot.PreferredResources]). If some group versions failed, it
// returns what it has and a *GroupDiscoveryFailedError.
func (c *Client) ServerPreferredResources(ctx context.Context) ([]*metav1.APIResourceList, error) {
	return serverPreferredResources(ctx, c)
}

func serverGroups(ctx context.Context, d Discoverer) (*metav1.APIGroupList, error) {
	s, err := d.Discover(ctx)
	if err != nil {
		return nil, err
	}
	return s.GroupList(), nil
}

func serverGroupsAndResources(ctx context.Context, d Discoverer) ([]metav1.APIGroup, []*metav1.APIResourceList, error) {
	s, err := d.Discover(ctx)
	if err != nil {
		return nil, nil, err
	}
	return append([]metav1.APIGroup(nil), s.Groups...), s.ResourceLists(), s.partialErr()
}

func serverPreferredResources(ctx context.Context, d Discoverer) ([]*metav1.APIResourceList, error) {
	s, err := d.Discover(ctx)
	if err != nil {
		return nil, err
	}
	return s.PreferredResources(), s.partialErr()
}

func groupVersionPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

// getJSON GETs path as JSON (or with the given Accept header) into v.
func (c *Client) getJSON(ctx context.Context, path, accept string, v any) error {
	if accept == "" {
		accept = "application/json"
	}
	res, err := c.rc.Get().AbsPath(path).Header("Accept", accept).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("discovery: %s: %w", path, err)
	}
	if err := json.Unmarshal(res.Body, v); err != nil {
		return fmt.Errorf("discovery: %s: decoding: %w", path, err)
	}
	return nil
}
