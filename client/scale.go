package client

import (
	"context"
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
)

// Scaler reads and sets the replicas of any resource with a scale
// subresource (deployments, replicasets, statefulsets, replication
// controllers, custom resources that declare one), found through
// discovery. It is safe for concurrent use.
type Scaler struct {
	rc     *rest.Client
	mapper *discovery.Mapper
	disc   discovery.Discoverer
}

// NewScaler returns a Scaler. d is used both to resolve names and to check
// that a resource has a scale subresource; wrap it in discovery.NewCached.
func NewScaler(rc *rest.Client, d discovery.Discoverer) *Scaler {
	return &Scaler{rc: rc, disc: d, mapper: discovery.NewMapper(d, discovery.MapperOptions{})}
}

// NoScaleError says a resource has no scale subresource.
type NoScaleError struct{ Resource schema.GroupVersionResource }

func (e *NoScaleError) Error() string {
	return fmt.Sprintf("client: %s has no scale subresource", e.Resource.GroupResource())
}

// resolve finds the resource for a kubectl-style name and checks it has a
// scale subresource.
func (s *Scaler) resolve(ctx context.Context, resource string) (discovery.Mapping, error) {
	m, err := s.mapper.ResourceFor(ctx, resource)
	if err != nil {
		return m, err
	}
	snap, err := s.disc.Discover(ctx)
	if err != nil {
		return m, err
	}
	if l, ok := snap.Resources[m.Resource.GroupVersion()]; ok {
		for _, r := range l.APIResources {
			if strings.EqualFold(r.Name, m.Resource.Resource+"/scale") {
				return m, nil
			}
		}
	}
	return m, &NoScaleError{Resource: m.Resource}
}

func (s *Scaler) req(r *rest.Request, m discovery.Mapping, ns, name string) *rest.Request {
	r = r.Group(m.Resource.Group).Version(m.Resource.Version).Resource(m.Resource.Resource).Name(name).SubResource("scale")
	if m.Namespaced {
		r = r.Namespace(ns)
	}
	return r
}

// Get returns the scale of the named object; resource is any name kubectl
// accepts ("deploy", "statefulsets.apps", "foos.example.com").
func (s *Scaler) Get(ctx context.Context, resource, namespace, name string) (*autoscalingv1.Scale, error) {
	m, err := s.resolve(ctx, resource)
	if err != nil {
		return nil, err
	}
	var sc autoscalingv1.Scale
	if err := s.req(s.rc.Get(), m, namespace, name).Do(ctx, &sc); err != nil {
		return nil, err
	}
	return &sc, nil
}

// SetReplicas sets the replicas of the named object and returns the new
// scale. A resourceVersion, if given, makes the change conditional (409 if
// stale); empty means unconditional.
func (s *Scaler) SetReplicas(ctx context.Context, resource, namespace, name string, replicas int32, resourceVersion string) (*autoscalingv1.Scale, error) {
	m, err := s.resolve(ctx, resource)
	if err != nil {
		return nil, err
	}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if resourceVersion != "" {
		patch = fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"replicas":%d}}`, resourceVersion, replicas)
	}
	var sc autoscalingv1.Scale
	err = s.req(s.rc.Patch(string(types.MergePatchType)), m, namespace, name).Options(&metav1.PatchOptions{}).Body([]byte(patch)).Do(ctx, &sc)
	if err != nil {
		return nil, err
	}
	return &sc, nil
}
