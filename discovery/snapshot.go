package discovery

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Snapshot is what a server said about its APIs at one moment. A Snapshot is
// not changed after it is returned; it may be shared.
type Snapshot struct {
	// Groups are the API groups in the server's order: the legacy core group
	// (name "") first, then the groups of /apis. Each group's Versions are in
	// the server's order of preference, and PreferredVersion is set.
	Groups []metav1.APIGroup
	// Resources holds, for each discovered group version, its resources,
	// including subresources (named "resource/subresource").
	Resources map[schema.GroupVersion]*metav1.APIResourceList
	// Failed holds the group versions that could not be discovered, and why.
	Failed map[schema.GroupVersion]error
	// Aggregated reports whether the snapshot came from aggregated
	// discovery rather than the legacy walk.
	Aggregated bool
}

// GroupDiscoveryFailedError is returned, together with the results that
// could be obtained, when some group versions could not be discovered.
type GroupDiscoveryFailedError struct {
	Groups map[schema.GroupVersion]error
}

func (e *GroupDiscoveryFailedError) Error() string {
	gvs := make([]string, 0, len(e.Groups))
	for gv, err := range e.Groups {
		gvs = append(gvs, fmt.Sprintf("%s: %v", gv, err))
	}
	sort.Strings(gvs)
	return "discovery: unable to retrieve the complete list of server APIs: " + strings.Join(gvs, "; ")
}

// partialErr returns a *GroupDiscoveryFailedError for s.Failed, or nil.
func (s *Snapshot) partialErr() error {
	if len(s.Failed) == 0 {
		return nil
	}
	return &GroupDiscoveryFailedError{Groups: s.Failed}
}

// GroupList returns the groups as a metav1.APIGroupList.
func (s *Snapshot) GroupList() *metav1.APIGroupList {
	return &metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   append([]metav1.APIGroup(nil), s.Groups...),
	}
}

// GroupVersions returns every group version as "group/version" ("v1" for
// the core group), sorted, as `kubectl api-versions` prints them.
func (s *Snapshot) GroupVersions() []string {
	var out []string
	for _, g := range s.Groups {
		for _, v := range g.Versions {
			out = append(out, v.GroupVersion)
		}
	}
	sort.Strings(out)
	return out
}

// ResourceLists returns the resource list of every discovered group
// version, in the order of Groups and their versions.
func (s *Snapshot) ResourceLists() []*metav1.APIResourceList {
	var out []*metav1.APIResourceList
	for _, g := range s.Groups {
		for _, v := range g.Versions {
			if l, ok := s.Resources[schema.GroupVersion{Group: g.Name, Version: v.Version}]; ok {
				out = append(out, l)
			}
		}
	}
	return out
}

// PreferredResources returns, for every group, each resource (not
// subresource) at one version: the group's preferred version if it serves
// the resource, else the first version in the group's order that does. The
// lists are in the order of Groups and versions; a group version none of
// whose resources were chosen gets an empty list.
func (s *Snapshot) PreferredResources() []*metav1.APIResourceList {
	var out []*metav1.APIResourceList
	for _, g := range s.Groups {
		chosen := map[string]string{} // resource -> version
		for _, v := range g.Versions {
			l, ok := s.Resources[schema.GroupVersion{Group: g.Name, Version: v.Version}]
			if !ok {
				continue
			}
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") {
					continue
				}
				prev, seen := chosen[r.Name]
				if !seen || (v.Version == g.PreferredVersion.Version && prev != v.Version) {
					chosen[r.Name] = v.Version
				}
			}
		}
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			l, ok := s.Resources[gv]
			if !ok {
				continue
			}
			pl := &metav1.APIResourceList{TypeMeta: l.TypeMeta, GroupVersion: l.GroupVersion}
			for _, r := range l.APIResources {
				if !strings.Contains(r.Name, "/") && chosen[r.Name] == v.Version {
					pl.APIResources = append(pl.APIResources, r)
				}
			}
			out = append(out, pl)
		}
	}
	return out
}
