package main

import (
	"bufio"
	"fmt"
	"maps"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/examples/ingress/operator"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
)

// TestIngressEndToEnd installs the example's manifests as a user would
// (kubectl apply -k config), runs the operator as its own service account,
// and follows annotated Services and their Ingresses through changes made
// by hand, down to the garbage collector's cascading delete.
func TestIngressEndToEnd(t *testing.T) {
	env := testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
	ctx := t.Context()
	e2e.Kubectl(t, env, "apply", "-k", "config")

	// Least privilege: the role is enough (the operator runs below with
	// it), and it is no more than the operator needs.
	for _, c := range []struct {
		verb, resource string
		extra          []string
		want           bool
	}{
		{"watch", "services", nil, true},
		{"list", "services", []string{"-n", "kube-system"}, true},
		{"get", "ingresses.networking.k8s.io", nil, false}, // reads come from the cache: CreateOrPatch makes no GET
		{"create", "ingresses.networking.k8s.io", nil, true},
		{"patch", "ingresses.networking.k8s.io", nil, true},
		{"delete", "ingresses.networking.k8s.io", nil, true},
		{"create", "events.events.k8s.io", nil, true},
		{"update", "leases.coordination.k8s.io", []string{"-n", "ingress-system"}, true},
		{"get", "services", nil, false},
		{"update", "services", nil, false},
		{"patch", "services", nil, false},
		{"delete", "services", nil, false},
		{"update", "ingresses.networking.k8s.io", nil, false},
		{"deletecollection", "ingresses.networking.k8s.io", nil, false},
		{"update", "ingresses.networking.k8s.io/status", nil, false},
		{"create", "ingressclasses.networking.k8s.io", nil, false},
		{"create", "events", nil, false}, // core/v1 Events: the recorder writes events.k8s.io only
		{"list", "secrets", nil, false},
		{"list", "endpointslices.discovery.k8s.io", nil, false},
		{"update", "leases.coordination.k8s.io", []string{"-n", "default"}, false},
		{"delete", "leases.coordination.k8s.io", []string{"-n", "ingress-system"}, false},
	} {
		if got := e2e.CanI(t, env, "ingress-system", "ingress-operator", c.verb, c.resource, c.extra...); got != c.want {
			t.Errorf("ingress-operator can %s %s %v: %v, want %v", c.verb, c.resource, c.extra, got, c.want)
		}
	}

	// The operator, as Run runs it, with its service account's token; the
	// manager is kept for its metrics (the requests it made).
	sa := e2e.ServiceAccount(t, env, "ingress-system", "ingress-operator")
	log, seen := testLogger(t)
	mgr, err := operator.NewManager(sa, operator.Options{
		LeaderElection: manager.LeaderElection{Enabled: true, Namespace: "ingress-system", Name: "ingress-operator"},
		Logger:         log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.Setup(mgr); err != nil {
		t.Fatal(err)
	}
	e2e.Run(t, mgr.Start)

	admin := e2e.Admin(t, env)
	rc, err := rest.New(admin, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	svcClient, err := client.For[corev1.Service](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ingClient, err := client.For[networkingv1.Ingress](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	evClient, err := client.For[eventsv1.Event](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, ings, evs := svcClient.Namespace("default"), ingClient.Namespace("default"), evClient.Namespace("default")

	// wantWrites waits until the operator's successful writes to Ingresses
	// (counted since it started) are exactly want: a write it should not
	// have made keeps them apart. (One made after the check passes would be
	// caught by the next check.)
	wantWrites := func(what string, want map[string]int) {
		t.Helper()
		e2e.Eventually(t, "the operator's writes "+what, func() (bool, string) {
			got := writes(t, mgr)
			return maps.Equal(got, want), fmt.Sprintf("%v, want %v", got, want)
		})
	}
	// ingress reads the named Ingress live, and says what it saw.
	ingress := func(name string) (*networkingv1.Ingress, bool, string) {
		ing, ok, err := client.Optional(ings.Get(ctx, name, metav1.GetOptions{}))
		if err != nil {
			return nil, false, err.Error()
		}
		if !ok {
			return nil, false, "no ingress " + name
		}
		return ing, true, describe(ing)
	}
	waitIngress := func(what, name string, cond func(*networkingv1.Ingress) bool) *networkingv1.Ingress {
		t.Helper()
		var got *networkingv1.Ingress
		e2e.Eventually(t, what, func() (bool, string) {
			ing, ok, state := ingress(name)
			got = ing
			return ok && cond(ing), state
		})
		return got
	}
	waitGone := func(what, name string) {
		t.Helper()
		e2e.Eventually(t, what, func() (bool, string) {
			_, ok, state := ingress(name)
			return !ok && strings.HasPrefix(state, "no ingress "), state
		})
	}
	waitEvent := func(svc, typ, reason string) {
		t.Helper()
		e2e.Eventually(t, fmt.Sprintf("a %s event %s on service %s", typ, reason, svc), func() (bool, string) {
			l, err := evs.List(ctx, metav1.ListOptions{FieldSelector: "regarding.kind=Service,regarding.name=" + svc})
			if err != nil {
				return false, err.Error()
			}
			var seen []string
			for _, e := range l.Items {
				seen = append(seen, e.Type+"/"+e.Reason+": "+e.Note)
				if e.Type == typ && e.Reason == reason && e.ReportingController == "examples.loom.dev/ingress-operator" {
					return true, ""
				}
			}
			return false, strings.Join(seen, "; ")
		})
	}
	update := func(name string, mutate func(*corev1.Service)) {
		t.Helper()
		if _, err := svcs.Mutate(ctx, name, func(s *corev1.Service) error { mutate(s); return nil }); err != nil {
			t.Fatal(err)
		}
	}

	// An annotated Service gets an Ingress: its name, owned by it, "/" to
	// its first port, for the host it names.
	web, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			operator.AnnotationHTTP: "true", operator.AnnotationHost: "web.example.com"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80}, {Name: "https", Port: 443}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing := waitIngress("the ingress of service web", "web", func(*networkingv1.Ingress) bool { return true })
	if got, want := describe(ing), "web.example.com / Prefix → web:80"; got != want {
		t.Errorf("ingress web routes %s, want %s", got, want)
	}
	if ref := metav1.GetControllerOf(ing); ref == nil || ref.UID != web.UID || ref.Kind != "Service" || ref.APIVersion != "v1" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("ingress's controller %+v, want service web (uid %s), blocking its deletion", ref, web.UID)
	}
	if ing.Spec.IngressClassName != nil || ing.Spec.TLS != nil || ing.Spec.DefaultBackend != nil {
		t.Errorf("ingress spec %+v: want no class, TLS or default backend", ing.Spec)
	}
	waitEvent("web", corev1.EventTypeNormal, "IngressCreated")
	wantWrites("after the first ingress", map[string]int{"POST": 1})

	// Nothing to change, nothing written: a label on the Service changes
	// nothing the Ingress depends on. The reconciles of web so far are two
	// (the Service's creation, then the Ingress's, through Owns), so the
	// third is the label's.
	e2e.Eventually(t, "two reconciles of default/web", func() (bool, string) {
		n := seen.Count("default/web")
		return n >= 2, strconv.Itoa(n)
	})
	n := seen.Count("default/web")
	update("web", func(s *corev1.Service) { s.Labels = map[string]string{"tier": "frontend"} })
	e2e.Eventually(t, "the label change to be reconciled", func() (bool, string) {
		c := seen.Count("default/web")
		return c > n, strconv.Itoa(c)
	})
	wantWrites("after a label change", map[string]int{"POST": 1})

	// The Ingress follows the Service's first port.
	update("web", func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 })
	ing = waitIngress("the ingress to follow the port", "web", func(ing *networkingv1.Ingress) bool {
		return describe(ing) == "web.example.com / Prefix → web:8080"
	})
	wantWrites("after a port change", map[string]int{"POST": 1, "PATCH": 1})
	waitEvent("web", corev1.EventTypeNormal, "IngressUpdated")

	// Edited by hand (another port, TLS): repaired.
	if _, err := ings.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"tls":[{"hosts":["web.example.com"],"secretName":"web-tls"}],`+
		`"rules":[{"host":"web.example.com","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"web","port":{"number":9999}}}}]}}]}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIngress("the hand-edited ingress to be repaired", "web", func(ing *networkingv1.Ingress) bool {
		return describe(ing) == "web.example.com / Prefix → web:8080" && ing.Spec.TLS == nil
	})
	wantWrites("after the repair", map[string]int{"POST": 1, "PATCH": 2})

	// Deleted by someone: made again.
	if err := ings.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := waitIngress("the deleted ingress to be made again", "web", func(again *networkingv1.Ingress) bool { return again.UID != ing.UID })
	if got, want := describe(again), "web.example.com / Prefix → web:8080"; got != want {
		t.Errorf("remade ingress routes %s, want %s", got, want)
	}
	wantWrites("after the ingress was deleted", map[string]int{"POST": 2, "PATCH": 2})

	// The annotation removed: the Ingress goes.
	update("web", func(s *corev1.Service) { delete(s.Annotations, operator.AnnotationHTTP) })
	waitGone("the ingress to go with the annotation", "web")
	waitEvent("web", corev1.EventTypeNormal, "IngressDeleted")
	wantWrites("after the annotation was removed", map[string]int{"POST": 2, "PATCH": 2, "DELETE": 1})

	// Annotated again, now with a class: back, in that class.
	update("web", func(s *corev1.Service) {
		s.Annotations[operator.AnnotationHTTP] = "true"
		s.Annotations[operator.AnnotationClass] = "internal"
	})
	ing = waitIngress("the ingress to come back", "web", func(ing *networkingv1.Ingress) bool { return ing.Spec.IngressClassName != nil })
	if got := *ing.Spec.IngressClassName; got != "internal" || describe(ing) != "web.example.com / Prefix → web:8080" {
		t.Errorf("ingress back in class %q, routing %s; want internal, web.example.com / Prefix → web:8080", got, describe(ing))
	}
	wantWrites("after the annotation came back", map[string]int{"POST": 3, "PATCH": 2, "DELETE": 1})

	// A Service without the annotation gets no Ingress, once the operator
	// has looked at it.
	if _, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the operator to reconcile default/plain", func() (bool, string) {
		c := seen.Count("default/plain")
		return c >= 1, strconv.Itoa(c)
	})
	if _, ok, state := ingress("plain"); ok {
		t.Errorf("service plain, without the annotation, has an ingress: %s", state)
	}

	// An Ingress of that name that the Service does not control is not
	// overwritten: a Warning event says why.
	prefix := networkingv1.PathTypePrefix
	theirs, err := ings.Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "someone-else",
					Port: networkingv1.ServiceBackendPort{Number: 1234}}}}}}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taken, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Annotations: map[string]string{operator.AnnotationHTTP: "true"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent("taken", corev1.EventTypeWarning, "IngressExists")
	still, err := ings.Get(ctx, "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if still.ResourceVersion != theirs.ResourceVersion || len(still.OwnerReferences) != 0 || describe(still) != " / Prefix → someone-else:1234" {
		t.Errorf("someone else's ingress was changed: rv %s → %s, owners %v, routes %s",
			theirs.ResourceVersion, still.ResourceVersion, still.OwnerReferences, describe(still))
	}
	wantWrites("after finding someone else's ingress", map[string]int{"POST": 3, "PATCH": 2, "DELETE": 1})
	// Once it is gone, the Service gets its own.
	if err := ings.Delete(ctx, "taken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ing = waitIngress("service taken's own ingress", "taken", func(ing *networkingv1.Ingress) bool { return ing.UID != theirs.UID })
	if ref := metav1.GetControllerOf(ing); ref == nil || ref.UID != taken.UID || describe(ing) != " / Prefix → taken:80" {
		t.Errorf("ingress taken: controller %+v, routes %s; want service taken, / Prefix → taken:80", ref, describe(ing))
	}
	wantWrites("after someone else's ingress went", map[string]int{"POST": 4, "PATCH": 2, "DELETE": 1})

	// A host that is not a DNS name: a Warning event, and the Ingress
	// stays as it was rather than go.
	update("taken", func(s *corev1.Service) { s.Annotations[operator.AnnotationHost] = "Not_A_Host" })
	waitEvent("taken", corev1.EventTypeWarning, "InvalidIngress")
	if still, err := ings.Get(ctx, "taken", metav1.GetOptions{}); err != nil || still.ResourceVersion != ing.ResourceVersion {
		t.Errorf("ingress taken after an invalid host: %v, %v; want it unchanged", err, still)
	}
	wantWrites("after an invalid host", map[string]int{"POST": 4, "PATCH": 2, "DELETE": 1})

	// The Service deleted (background propagation, the default): the
	// garbage collector deletes its Ingress, not the operator.
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone("the garbage collector to delete the ingress of the deleted service", "web")
	wantWrites("after the service was deleted", map[string]int{"POST": 4, "PATCH": 2, "DELETE": 1})
}

// describe summarises an Ingress's routing as "host path type → service:port",
// one rule and path per line.
func describe(ing *networkingv1.Ingress) string {
	var lines []string
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			lines = append(lines, r.Host+" (no paths)")
			continue
		}
		for _, p := range r.HTTP.Paths {
			typ := "<nil>"
			if p.PathType != nil {
				typ = string(*p.PathType)
			}
			to := "<no service>"
			if s := p.Backend.Service; s != nil {
				to = s.Name + ":" + strconv.Itoa(int(s.Port.Number)) + s.Port.Name
			}
			lines = append(lines, r.Host+" "+p.Path+" "+typ+" → "+to)
		}
	}
	return strings.Join(lines, "\n")
}

// writes returns the operator's successful writes to Ingresses (POST, PUT,
// PATCH, DELETE answered 2xx), by method, from its manager's metrics.
func writes(t *testing.T, mgr *manager.Manager) map[string]int {
	t.Helper()
	rec := httptest.NewRecorder()
	mgr.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got := map[string]int{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "loom_rest_requests_total{") || !strings.Contains(line, `resource="ingresses"`) ||
			!strings.Contains(line, `code="2`) {
			continue
		}
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			if strings.Contains(line, `method="`+m+`"`) {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("metrics line %q: %v", line, err)
				}
				got[m] += int(v)
			}
		}
	}
	return got
}
