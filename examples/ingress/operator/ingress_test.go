package operator

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// service returns the Service default/web, as stored, with the given
// annotations and ports.
func service(annotations map[string]string, ports ...int32) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", Annotations: annotations}}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p, Protocol: corev1.ProtocolTCP})
	}
	return s
}

func TestDesired(t *testing.T) {
	on := func(kv ...string) map[string]string {
		m := map[string]string{AnnotationHTTP: "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name    string
		svc     *corev1.Service
		none    bool   // no Ingress wanted
		host    string // the rule's host
		port    int32  // the backend's port
		class   string // spec.ingressClassName; "" for nil
		wantErr string // a part of the error
	}{
		{name: "no annotations", svc: service(nil, 80), none: true},
		{name: "annotation false", svc: service(map[string]string{AnnotationHTTP: "false"}, 80), none: true},
		{name: "annotation not exactly true", svc: service(map[string]string{AnnotationHTTP: "True"}, 80), none: true},
		{name: "host without http", svc: service(map[string]string{AnnotationHost: "a.example.com"}, 80), none: true},
		{name: "annotated", svc: service(on(), 80), port: 80},
		{name: "first of several ports", svc: service(on(), 8080, 443), port: 8080},
		{name: "host", svc: service(on(AnnotationHost, "shop.example.com"), 80), host: "shop.example.com", port: 80},
		{name: "wildcard host", svc: service(on(AnnotationHost, "*.example.com"), 80), host: "*.example.com", port: 80},
		{name: "class", svc: service(on(AnnotationClass, "nginx"), 80), class: "nginx", port: 80},
		{name: "host and class", svc: service(on(AnnotationHost, "a.b", AnnotationClass, "internal"), 9000), host: "a.b", class: "internal", port: 9000},
		{name: "no port", svc: service(on()), wantErr: "no port"},
		{name: "host with upper case", svc: service(on(AnnotationHost, "Shop.example.com"), 80), wantErr: AnnotationHost},
		{name: "host is an IP", svc: service(on(AnnotationHost, "10.0.0.1"), 80), wantErr: "IP address"},
		{name: "host with a port", svc: service(on(AnnotationHost, "a.example.com:80"), 80), wantErr: AnnotationHost},
		{name: "wildcard inside", svc: service(on(AnnotationHost, "a.*.example.com"), 80), wantErr: AnnotationHost},
		{name: "empty class", svc: service(on(AnnotationClass, ""), 80), wantErr: AnnotationClass},
		{name: "class with a slash", svc: service(on(AnnotationClass, "a/b"), 80), wantErr: AnnotationClass},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ing, err := desired(tc.svc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("desired = %v, %v; want an error containing %q", ing, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.none {
				if ing != nil {
					t.Fatalf("desired = %+v, want none", ing)
				}
				return
			}
			if ing.Name != "web" || ing.Namespace != "default" {
				t.Errorf("ingress %s/%s, want default/web", ing.Namespace, ing.Name)
			}
			if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].HTTP == nil || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
				t.Fatalf("rules %+v, want one rule with one path", ing.Spec.Rules)
			}
			rule := ing.Spec.Rules[0]
			path := rule.HTTP.Paths[0]
			if rule.Host != tc.host {
				t.Errorf("host %q, want %q", rule.Host, tc.host)
			}
			if path.Path != "/" || path.PathType == nil || *path.PathType != networkingv1.PathTypePrefix {
				t.Errorf("path %q type %v, want / Prefix", path.Path, path.PathType)
			}
			if b := path.Backend.Service; b == nil || b.Name != "web" || b.Port.Number != tc.port || b.Port.Name != "" {
				t.Errorf("backend %+v, want service web port %d", path.Backend, tc.port)
			}
			if got := ptrString(ing.Spec.IngressClassName); got != tc.class {
				t.Errorf("class %q, want %q", got, tc.class)
			}
			if ing.Spec.DefaultBackend != nil || ing.Spec.TLS != nil || len(ing.OwnerReferences) != 0 {
				t.Errorf("spec %+v, owners %v: want rules only", ing.Spec, ing.OwnerReferences)
			}
		})
	}
}

// TestApply follows an Ingress as stored through claim and apply, as the
// reconciler does, and checks whether a write is needed.
func TestApply(t *testing.T) {
	web := service(map[string]string{AnnotationHTTP: "true", AnnotationHost: "web.example.com"}, 80)
	want, err := desired(web)
	if err != nil {
		t.Fatal(err)
	}
	// stored is the Ingress the operator made for web, as the server
	// returns it.
	stored := func() *networkingv1.Ingress {
		ing := want.DeepCopy()
		ing.UID, ing.ResourceVersion, ing.Generation = "uid-ing", "42", 1
		ing.CreationTimestamp = metav1.Now()
		yes := true
		ing.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: web.UID, Controller: &yes, BlockOwnerDeletion: &yes}}
		return ing
	}
	cases := []struct {
		name      string
		ing       func() *networkingv1.Ingress // as stored; nil: none yet
		claimErr  error                        // claim's error, matched with errors.Is
		write     bool                         // apply changes it
		wantClass string
	}{
		{name: "new", ing: nil, write: true},
		{name: "in line", ing: stored},
		{name: "in line, with status, labels and annotations others set", ing: func() *networkingv1.Ingress {
			ing := stored()
			ing.Labels = map[string]string{"team": "shop"}
			ing.Annotations = map[string]string{"cert-manager.io/cluster-issuer": "letsencrypt"}
			ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}
			return ing
		}},
		{name: "in line, class set by the cluster is kept", ing: func() *networkingv1.Ingress {
			ing := stored()
			class := "default-class"
			ing.Spec.IngressClassName = &class
			return ing
		}, wantClass: "default-class"},
		{name: "port edited by hand", ing: func() *networkingv1.Ingress {
			ing := stored()
			ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Number = 9999
			return ing
		}, write: true},
		{name: "TLS added by hand", ing: func() *networkingv1.Ingress {
			ing := stored()
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.example.com"}, SecretName: "web-tls"}}
			return ing
		}, write: true},
		{name: "rule added by hand", ing: func() *networkingv1.Ingress {
			ing := stored()
			ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: "other.example.com"})
			return ing
		}, write: true},
		{name: "owner reference removed", ing: func() *networkingv1.Ingress {
			ing := stored()
			ing.OwnerReferences = nil
			return ing
		}, claimErr: errTaken},
		{name: "made by hand", ing: func() *networkingv1.Ingress {
			ing := want.DeepCopy()
			ing.UID = "uid-other"
			return ing
		}, claimErr: errTaken},
		{name: "controlled by something else", ing: func() *networkingv1.Ingress {
			ing := stored()
			ref := &ing.OwnerReferences[0]
			ref.Kind, ref.APIVersion, ref.Name, ref.UID = "Gateway", "example.com/v1", "gw", "uid-gw"
			return ing
		}, claimErr: errTaken},
		{name: "owned, not controlled, by the service", ing: func() *networkingv1.Ingress {
			ing := stored()
			ing.OwnerReferences[0].Controller = nil
			return ing
		}, claimErr: errTaken},
		{name: "controlled by an earlier service of the same name", ing: func() *networkingv1.Ingress {
			ing := stored()
			ing.OwnerReferences[0].UID = "uid-earlier"
			return ing
		}, claimErr: errEarlierOwner},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cur, next *networkingv1.Ingress
			if tc.ing == nil {
				next = &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
			} else {
				cur = tc.ing()
				if err := claim(cur, web); !errors.Is(err, tc.claimErr) || (err == nil) != (tc.claimErr == nil) {
					t.Fatalf("claim = %v, want %v", err, tc.claimErr)
				}
				if tc.claimErr != nil {
					return
				}
				next = cur.DeepCopy()
			}
			if err := apply(next, want, web); err != nil {
				t.Fatal(err)
			}
			if wrote := cur == nil || !equality.Semantic.DeepEqual(cur, next); wrote != tc.write {
				t.Errorf("write needed: %v, want %v\nstored: %+v\nafter:  %+v", wrote, tc.write, cur, next)
			}
			// Whatever it was, it is now what the Service asks for, owned
			// by it.
			if !equality.Semantic.DeepEqual(next.Spec.Rules, want.Spec.Rules) || next.Spec.TLS != nil || next.Spec.DefaultBackend != nil {
				t.Errorf("spec after apply %+v, want %+v", next.Spec, want.Spec)
			}
			if err := claim(next, web); err != nil {
				t.Errorf("after apply: %v", err)
			}
			if got := ptrString(next.Spec.IngressClassName); got != tc.wantClass {
				t.Errorf("class %q, want %q", got, tc.wantClass)
			}
			if cur != nil && (!equality.Semantic.DeepEqual(cur.Labels, next.Labels) || !equality.Semantic.DeepEqual(cur.Annotations, next.Annotations) ||
				!equality.Semantic.DeepEqual(cur.Status, next.Status)) {
				t.Errorf("labels, annotations or status changed: %+v → %+v", cur.ObjectMeta, next.ObjectMeta)
			}
		})
	}
}

// A class the Service names replaces the one the Ingress has.
func TestApplyClass(t *testing.T) {
	web := service(map[string]string{AnnotationHTTP: "true", AnnotationClass: "internal"}, 80)
	web.UID = types.UID("uid-web")
	want, err := desired(web)
	if err != nil {
		t.Fatal(err)
	}
	ing := want.DeepCopy()
	old := "public"
	ing.Spec.IngressClassName = &old
	if err := apply(ing, want, web); err != nil {
		t.Fatal(err)
	}
	if got := ptrString(ing.Spec.IngressClassName); got != "internal" {
		t.Errorf("class %q, want internal", got)
	}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
