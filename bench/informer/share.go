package main

// An experiment for the plan in docs/performance.md, not a Loom feature:
// a Transform that shares identical parts between cached Pods (containers,
// volumes, tolerations, FieldsV1 blobs, label and annotation maps, owner
// references) and interns short repeated strings. Cached objects are
// read-only, so sharing is safe for readers. The tables only grow; a real
// implementation would hash wire bytes during decode and drop entries no
// object uses.

import (
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type sharer struct {
	mu     sync.Mutex
	strs   map[string]string
	conts  map[string][]corev1.Container
	vols   map[string][]corev1.Volume
	tols   map[string][]corev1.Toleration
	fields map[string]*metav1.FieldsV1
	smaps  map[string]map[string]string
	owners map[string][]metav1.OwnerReference
	secctx map[string]*corev1.PodSecurityContext
}

func newSharer() *sharer {
	return &sharer{strs: map[string]string{}, conts: map[string][]corev1.Container{}, vols: map[string][]corev1.Volume{},
		tols: map[string][]corev1.Toleration{}, fields: map[string]*metav1.FieldsV1{}, smaps: map[string]map[string]string{},
		owners: map[string][]metav1.OwnerReference{}, secctx: map[string]*corev1.PodSecurityContext{}}
}

func shareBy[V any](m map[string]V, key string, v V) V {
	if old, ok := m[key]; ok {
		return old
	}
	m[key] = v
	return v
}

func marshalAll[T interface{ Marshal() ([]byte, error) }](xs []T) string {
	var b strings.Builder
	for _, x := range xs {
		raw, _ := x.Marshal()
		b.Write(raw)
		b.WriteByte(0)
	}
	return b.String()
}

func ptrs[T any](xs []T) []*T {
	out := make([]*T, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}

func (s *sharer) str(v string) string { return shareBy(s.strs, v, v) }

func (s *sharer) smap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return shareBy(s.smaps, b.String(), m)
}

func (s *sharer) pod(p *corev1.Pod) (*corev1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Namespace = s.str(p.Namespace)
	p.GenerateName = s.str(p.GenerateName)
	p.Labels = s.smap(p.Labels)
	p.Annotations = s.smap(p.Annotations)
	p.OwnerReferences = shareBy(s.owners, marshalAll(ptrs(p.OwnerReferences)), p.OwnerReferences)
	for i := range p.ManagedFields {
		m := &p.ManagedFields[i]
		m.Manager, m.APIVersion, m.Subresource = s.str(m.Manager), s.str(m.APIVersion), s.str(m.Subresource)
		if m.FieldsV1 != nil {
			m.FieldsV1 = shareBy(s.fields, string(m.FieldsV1.Raw), m.FieldsV1)
		}
	}
	sp := &p.Spec
	sp.Containers = shareBy(s.conts, marshalAll(ptrs(sp.Containers)), sp.Containers)
	sp.InitContainers = shareBy(s.conts, "init"+marshalAll(ptrs(sp.InitContainers)), sp.InitContainers)
	sp.Volumes = shareBy(s.vols, marshalAll(ptrs(sp.Volumes)), sp.Volumes)
	sp.Tolerations = shareBy(s.tols, marshalAll(ptrs(sp.Tolerations)), sp.Tolerations)
	if sp.SecurityContext != nil {
		raw, _ := sp.SecurityContext.Marshal()
		sp.SecurityContext = shareBy(s.secctx, string(raw), sp.SecurityContext)
	}
	sp.NodeName, sp.ServiceAccountName, sp.DeprecatedServiceAccount = s.str(sp.NodeName), s.str(sp.ServiceAccountName), s.str(sp.DeprecatedServiceAccount)
	sp.SchedulerName = s.str(sp.SchedulerName)
	st := &p.Status
	st.HostIP = s.str(st.HostIP)
	for i := range st.HostIPs {
		st.HostIPs[i].IP = s.str(st.HostIPs[i].IP)
	}
	for _, cs := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range cs {
			cs[i].Name, cs[i].Image, cs[i].ImageID = s.str(cs[i].Name), s.str(cs[i].Image), s.str(cs[i].ImageID)
		}
	}
	for i := range st.Conditions {
		st.Conditions[i].Type = corev1.PodConditionType(s.str(string(st.Conditions[i].Type)))
	}
	return p, nil
}
