package fake

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gcManager names the garbage collector's writes in managedFields.
const gcManager = "kube-controller-manager"

// collectGarbage does the garbage collector's work when
// Options.GarbageCollection is on, until there is none left; the caller
// holds mu.
func (s *Server) collectGarbage() {
	if !s.gc {
		return
	}
	for s.collectOnce() {
	}
}

// ref locates a stored object.
type ref struct {
	r   *resource
	key string
}

// collectOnce makes one pass and reports whether it changed anything.
func (s *Server) collectOnce() bool {
	uids := map[string]bool{}
	var all []ref
	for _, rs := range s.byGR {
		r := rs[0]
		for _, k := range sortedKeys(s.objects[r.gr()]) {
			uids[str(metadata(s.objects[r.gr()][k].obj), "uid")] = true
			all = append(all, ref{r, k})
		}
	}
	dependents := func(uid string) []ref {
		var out []ref
		for _, d := range all {
			st := s.objects[d.r.gr()][d.key]
			if st == nil {
				continue
			}
			for _, o := range ownerRefs(st.obj) {
				if o.uid == uid {
					out = append(out, d)
					break
				}
			}
		}
		return out
	}
	changed := false
	for _, x := range all {
		st := s.objects[x.r.gr()][x.key]
		if st == nil {
			continue
		}
		md := metadata(st.obj)
		uid := str(md, "uid")
		q := &request{r: x.r, ns: str(md, "namespace"), name: str(md, "name"), manager: gcManager}
		finalizers := stringSlice(md["finalizers"])
		_, deleting := md["deletionTimestamp"]
		switch {
		case deleting && slices.Contains(finalizers, metav1.FinalizerOrphanDependents):
			for _, d := range dependents(uid) {
				dst := s.objects[d.r.gr()][d.key]
				obj := deepCopy(dst.obj)
				var keep []any
				for _, o := range ownerRefs(obj) {
					if o.uid != uid {
						keep = append(keep, o.raw)
					}
				}
				dmd := metadata(obj)
				if len(keep) == 0 {
					delete(dmd, "ownerReferences")
				} else {
					dmd["ownerReferences"] = keep
				}
				dq := &request{r: d.r, ns: str(dmd, "namespace"), name: str(dmd, "name"), manager: gcManager}
				s.commitUpdate(dq, dst, obj, false)
			}
			s.dropFinalizer(q, st, metav1.FinalizerOrphanDependents)
			changed = true
		case deleting && slices.Contains(finalizers, metav1.FinalizerDeleteDependents):
			deps := dependents(uid)
			for _, d := range deps {
				dst := s.objects[d.r.gr()][d.key]
				dmd := metadata(dst.obj)
				if _, ok := dmd["deletionTimestamp"]; ok {
					continue
				}
				s.delete(&request{r: d.r, ns: str(dmd, "namespace"), name: str(dmd, "name"), manager: gcManager}, &metav1.DeleteOptions{})
				changed = true
			}
			if len(dependents(uid)) == 0 {
				s.dropFinalizer(q, st, metav1.FinalizerDeleteDependents)
				changed = true
			}
		case !deleting:
			owners := ownerRefs(st.obj)
			if len(owners) == 0 {
				continue
			}
			alive := false
			for _, o := range owners {
				alive = alive || uids[o.uid]
			}
			if !alive {
				s.delete(q, &metav1.DeleteOptions{})
				changed = true
			}
		}
	}
	return changed
}

// dropFinalizer removes one finalizer of an object being deleted.
func (s *Server) dropFinalizer(q *request, st *stored, f string) {
	obj := deepCopy(st.obj)
	md := metadata(obj)
	var keep []any
	for _, x := range stringSlice(md["finalizers"]) {
		if x != f {
			keep = append(keep, x)
		}
	}
	if len(keep) == 0 {
		delete(md, "finalizers")
	} else {
		md["finalizers"] = keep
	}
	s.commitUpdate(q, st, obj, false)
}

type ownerRef struct {
	uid string
	raw any
}

func ownerRefs(obj map[string]any) []ownerRef {
	l, _ := metadata(obj)["ownerReferences"].([]any)
	out := make([]ownerRef, 0, len(l))
	for _, o := range l {
		m, _ := o.(map[string]any)
		out = append(out, ownerRef{uid: str(m, "uid"), raw: o})
	}
	return out
}
