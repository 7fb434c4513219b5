package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
)

// historySize is how many recent events a Store keeps for watches that
// start from a resourceVersion. A watch from an older one gets 410 Gone and
// the client relists, as with etcd after a compaction.
const historySize = 1000

// watchBuffer is how many events a watcher may fall behind before the
// store ends its watch (the client re-watches from its last event).
const watchBuffer = 1000

// Resource describes one resource for a Store.
type Resource struct {
	Resource, Singular, Kind string
	ShortNames               []string
	Namespaced               bool
	New, NewList             func() runtime.Object
	// Validate checks an object besides its metadata. old is nil on create.
	Validate func(obj, old runtime.Object) field.ErrorList
	// SpecEqual says whether two objects have the same desired state, to
	// decide whether an update bumps metadata.generation.
	SpecEqual func(a, b runtime.Object) bool
	// Table renders objects for kubectl and loom get.
	Table rest.TableConvertor
}

// Store serves one resource from a Backend: get, list, create, update
// (and so patch), delete, delete-collection and watch, with
// resourceVersions, optimistic concurrency, dry runs and label and field
// selectors. It implements rest.StandardStorage.
type Store struct {
	Resource
	b *Backend

	// guarded by b.mu
	objects  map[string]runtime.Object
	history  []watch.Event // the last historySize events, oldest first
	since    uint64        // events after this resourceVersion are all in history
	watchers map[*watcher]struct{}
	closed   bool // Destroy was called: no new watches

	// names makes names from metadata.generateName; nil means
	// names.SimpleNameGenerator (five random characters).
	names names.NameGenerator
}

// generateNameAttempts is how many names Create tries for an object with
// generateName before it gives up with AlreadyExists, as kube-apiserver
// does (its RetryGenerateName behaviour).
const generateNameAttempts = 8

var (
	_ rest.StandardStorage      = (*Store)(nil)
	_ rest.Scoper               = (*Store)(nil)
	_ rest.SingularNameProvider = (*Store)(nil)
	_ rest.ShortNamesProvider   = (*Store)(nil)
)

// NewStore returns a Store for r in b, holding the objects of its kind that
// b loaded from its file.
func NewStore(b *Backend, r Resource) (*Store, error) {
	s := &Store{Resource: r, b: b, objects: map[string]runtime.Object{}, watchers: map[*watcher]struct{}{}}
	if err := b.register(s); err != nil {
		return nil, err
	}
	s.since = b.ResourceVersion()
	return s, nil
}

func (s *Store) nameGenerator() names.NameGenerator {
	if s.names != nil {
		return s.names
	}
	return names.SimpleNameGenerator
}

func (s *Store) New() runtime.Object     { return s.Resource.New() }
func (s *Store) NewList() runtime.Object { return s.Resource.NewList() }
func (s *Store) NamespaceScoped() bool   { return s.Namespaced }
func (s *Store) GetSingularName() string { return s.Singular }
func (s *Store) ShortNames() []string    { return s.Resource.ShortNames }

// Destroy ends every watch and refuses new ones (503), so that a server
// shutting down is not held by watches that clients open meanwhile.
func (s *Store) Destroy() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.closed = true
	for w := range s.watchers {
		w.closeLocked()
	}
}

func (s *Store) ConvertToTable(ctx context.Context, obj, opts runtime.Object) (*metav1.Table, error) {
	return s.Table.ConvertToTable(ctx, obj, opts)
}

// keyFor returns the key of name in the request's namespace.
func (s *Store) keyFor(ctx context.Context, name string) (string, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	if s.Namespaced && ns == "" {
		return "", apierrors.NewBadRequest(s.Resource.Resource + " are namespaced: the request has no namespace")
	}
	if !s.Namespaced {
		ns = ""
	}
	if name == "" {
		return "", apierrors.NewBadRequest("name is required")
	}
	return key(ns, name), nil
}

// Get returns a copy of the object.
func (s *Store) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	k, err := s.keyFor(ctx, name)
	if err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	o, ok := s.objects[k]
	if !ok {
		return nil, apierrors.NewNotFound(s.groupResource(), name)
	}
	return o.DeepCopyObject(), nil
}

// filter matches objects against a request's namespace and selectors.
type filter struct {
	namespace string
	labels    labels.Selector
	fields    fields.Selector
}

func (s *Store) filterFor(ctx context.Context, opts *metainternalversion.ListOptions) filter {
	f := filter{namespace: genericapirequest.NamespaceValue(ctx), labels: labels.Everything(), fields: fields.Everything()}
	if !s.Namespaced {
		f.namespace = ""
	}
	if opts != nil && opts.LabelSelector != nil {
		f.labels = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		f.fields = opts.FieldSelector
	}
	return f
}

func (f filter) matches(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if f.namespace != "" && m.GetNamespace() != f.namespace {
		return false
	}
	set := fields.Set{"metadata.name": m.GetName()}
	if m.GetNamespace() != "" {
		set["metadata.namespace"] = m.GetNamespace()
	}
	return f.labels.Matches(labels.Set(m.GetLabels())) && f.fields.Matches(set)
}

// List returns every matching object, sorted by namespace and name, at the
// backend's latest resourceVersion. It serves every list in one page: a
// limit is allowed by the API to be ignored, and the answer then has no
// continue token.
func (s *Store) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	f := s.filterFor(ctx, opts)
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	list := s.Resource.NewList()
	var items []runtime.Object
	for _, k := range s.sortedKeysLocked() {
		if o := s.objects[k]; f.matches(o) {
			items = append(items, o.DeepCopyObject())
		}
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(strconv.FormatUint(s.b.rv, 10))
	return list, nil
}

func (s *Store) sortedKeysLocked() []string {
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func dryRun(opts []string) bool { return slices.Contains(opts, metav1.DryRunAll) }

// validateMeta checks the name and namespace of obj.
func (s *Store) validateMeta(obj runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	return apivalidation.ValidateObjectMetaAccessor(m, s.Namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

func (s *Store) invalid(name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: restaurant.GroupName, Kind: s.Kind}, name, errs)
}

// Create stores a new object. Validation and admission run before the
// store's lock is taken, so admission may read other stores.
func (s *Store) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	ns := genericapirequest.NamespaceValue(ctx)
	if s.Namespaced {
		if ns == "" {
			return nil, apierrors.NewBadRequest(s.Resource.Resource + " are namespaced: the request has no namespace")
		}
		if m.GetNamespace() != "" && m.GetNamespace() != ns {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace of the request (%s)", m.GetNamespace(), ns))
		}
		m.SetNamespace(ns)
	} else {
		m.SetNamespace("")
	}
	generated := m.GetName() == "" && m.GetGenerateName() != ""
	if generated {
		m.SetName(s.nameGenerator().GenerateName(m.GetGenerateName()))
	}
	m.SetUID(types.UID(uuid.NewUUID()))
	m.SetCreationTimestamp(now())
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetGeneration(1)
	m.SetResourceVersion("")
	errs := s.validateMeta(obj)
	errs = append(errs, s.Validate(obj, nil)...)
	if len(errs) > 0 {
		return nil, s.invalid(m.GetName(), errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj); err != nil {
			return nil, err
		}
	}
	k := key(m.GetNamespace(), m.GetName())
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	for try := 1; generated && try < generateNameAttempts; try++ {
		if _, ok := s.objects[k]; !ok {
			break
		}
		// The random part collided: another name of the same length, so
		// validation still holds.
		m.SetName(s.nameGenerator().GenerateName(m.GetGenerateName()))
		k = key(m.GetNamespace(), m.GetName())
	}
	if _, ok := s.objects[k]; ok {
		return nil, apierrors.NewAlreadyExists(s.groupResource(), m.GetName())
	}
	if opts != nil && dryRun(opts.DryRun) {
		return obj, nil
	}
	if err := s.commitLocked(k, nil, obj, watch.Added); err != nil {
		return nil, err
	}
	return obj.DeepCopyObject(), nil
}

// commitLocked stamps a new resourceVersion on obj, puts it in place of old
// (nil: none) or removes the key (for watch.Deleted), writes the file, and
// tells the watchers. If the file cannot be written, the change is undone.
func (s *Store) commitLocked(k string, old, obj runtime.Object, typ watch.EventType) error {
	prevRV := s.b.rv
	rv := s.b.nextRV()
	setRV(obj, rv)
	if typ == watch.Deleted {
		delete(s.objects, k)
	} else {
		s.objects[k] = obj
	}
	if err := s.b.persist(); err != nil {
		s.b.rv = prevRV
		if old != nil {
			s.objects[k] = old
		} else {
			delete(s.objects, k)
		}
		return apierrors.NewInternalError(fmt.Errorf("write storage file: %w", err))
	}
	s.broadcastLocked(watch.Event{Type: typ, Object: obj.DeepCopyObject()}, old)
	return nil
}

// Update replaces an object, computing the new one from the current one
// (for patches and server-side apply) with optimistic concurrency: a
// resourceVersion in the new object must match the stored one, else 409.
// A write that changes nothing keeps the resourceVersion and sends no
// event.
func (s *Store) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	k, err := s.keyFor(ctx, name)
	if err != nil {
		return nil, false, err
	}
	for {
		s.b.mu.Lock()
		cur, ok := s.objects[k]
		s.b.mu.Unlock()
		if !ok {
			if !forceAllowCreate {
				return nil, false, apierrors.NewNotFound(s.groupResource(), name)
			}
			obj, err := objInfo.UpdatedObject(ctx, nil)
			if err != nil {
				return nil, false, err
			}
			created, err := s.Create(ctx, obj, createValidation, &metav1.CreateOptions{DryRun: opts.DryRun})
			return created, err == nil, err
		}
		old := cur.DeepCopyObject()
		obj, err := objInfo.UpdatedObject(ctx, old)
		if err != nil {
			return nil, false, err
		}
		om, _ := meta.Accessor(old)
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, false, apierrors.NewBadRequest(err.Error())
		}
		if m.GetName() != name {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name in the URL (%s)", m.GetName(), name))
		}
		if rv := m.GetResourceVersion(); rv != "" && rv != om.GetResourceVersion() {
			return nil, false, apierrors.NewConflict(s.groupResource(), name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		// Fields the server owns.
		m.SetNamespace(om.GetNamespace())
		m.SetUID(om.GetUID())
		m.SetCreationTimestamp(om.GetCreationTimestamp())
		m.SetDeletionTimestamp(om.GetDeletionTimestamp())
		m.SetGeneration(om.GetGeneration())
		if !s.SpecEqual(old, obj) {
			m.SetGeneration(om.GetGeneration() + 1)
		}
		m.SetResourceVersion(om.GetResourceVersion())
		errs := s.validateMeta(obj)
		errs = append(errs, s.Validate(obj, old)...)
		if len(errs) > 0 {
			return nil, false, s.invalid(name, errs)
		}
		if updateValidation != nil {
			if err := updateValidation(ctx, obj, old); err != nil {
				return nil, false, err
			}
		}
		s.b.mu.Lock()
		if s.objects[k] != cur { // changed meanwhile: start again from the new state
			s.b.mu.Unlock()
			continue
		}
		defer s.b.mu.Unlock()
		if equalObjects(old, obj) || (opts != nil && dryRun(opts.DryRun)) {
			return obj, false, nil
		}
		// An object being deleted goes once its last finalizer is removed.
		if m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
			if err := s.commitLocked(k, cur, obj, watch.Deleted); err != nil {
				return nil, false, err
			}
			return obj.DeepCopyObject(), false, nil
		}
		if err := s.commitLocked(k, cur, obj, watch.Modified); err != nil {
			return nil, false, err
		}
		return obj.DeepCopyObject(), false, nil
	}
}

// Delete removes an object at once, or, if it has finalizers, marks it
// deleted (deletionTimestamp) and keeps it until an update removes the
// last one.
func (s *Store) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	k, err := s.keyFor(ctx, name)
	if err != nil {
		return nil, false, err
	}
	s.b.mu.Lock()
	cur, ok := s.objects[k]
	s.b.mu.Unlock()
	if !ok {
		return nil, false, apierrors.NewNotFound(s.groupResource(), name)
	}
	obj := cur.DeepCopyObject()
	m, _ := meta.Accessor(obj)
	if opts != nil && opts.Preconditions != nil {
		if p := opts.Preconditions.UID; p != nil && *p != m.GetUID() {
			return nil, false, apierrors.NewConflict(s.groupResource(), name, fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *p, m.GetUID()))
		}
		if p := opts.Preconditions.ResourceVersion; p != nil && *p != m.GetResourceVersion() {
			return nil, false, apierrors.NewConflict(s.groupResource(), name, fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p, m.GetResourceVersion()))
		}
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, obj); err != nil {
			return nil, false, err
		}
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.objects[k] != cur {
		return nil, false, apierrors.NewConflict(s.groupResource(), name, errors.New("the object changed during deletion; try again"))
	}
	if opts != nil && dryRun(opts.DryRun) {
		return obj, true, nil
	}
	if len(m.GetFinalizers()) > 0 {
		if m.GetDeletionTimestamp() == nil {
			t := now()
			m.SetDeletionTimestamp(&t)
			var zero int64
			m.SetDeletionGracePeriodSeconds(&zero)
			if err := s.commitLocked(k, cur, obj, watch.Modified); err != nil {
				return nil, false, err
			}
		}
		return obj.DeepCopyObject(), false, nil
	}
	if err := s.commitLocked(k, cur, obj, watch.Deleted); err != nil {
		return nil, false, err
	}
	return obj.DeepCopyObject(), true, nil
}

// DeleteCollection deletes every matching object, one by one.
func (s *Store) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions, listOpts *metainternalversion.ListOptions) (runtime.Object, error) {
	list, err := s.List(ctx, listOpts)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var deleted []runtime.Object
	for _, it := range items {
		m, _ := meta.Accessor(it)
		ctx := genericapirequest.WithNamespace(ctx, m.GetNamespace())
		o, _, err := s.Delete(ctx, m.GetName(), deleteValidation, opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		deleted = append(deleted, o)
	}
	out := s.Resource.NewList()
	if err := meta.SetList(out, deleted); err != nil {
		return nil, err
	}
	return out, nil
}

// equalObjects says whether an update changes nothing.
func equalObjects(a, b runtime.Object) bool { return apiequality.Semantic.DeepEqual(a, b) }

// groupResource names the resource in API errors.
func (r Resource) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: restaurant.GroupName, Resource: r.Resource}
}
