package server

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1alpha1"
	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1beta1"
)

// randomPizza is a valid internal pizza: distinct names, quantities 1-10.
func randomPizza(r *rand.Rand) *restaurant.Pizza {
	p := &restaurant.Pizza{}
	p.Name = "p"
	for i := range r.IntN(6) {
		p.Spec.Toppings = append(p.Spec.Toppings, restaurant.PizzaTopping{Name: string(rune('a' + i)), Quantity: 1 + r.IntN(10)})
	}
	r.Shuffle(len(p.Spec.Toppings), func(i, j int) { p.Spec.Toppings[i], p.Spec.Toppings[j] = p.Spec.Toppings[j], p.Spec.Toppings[i] })
	return p
}

// The hub round trip is lossless through either external version, for
// every valid pizza.
func TestConversionRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		in := randomPizza(r)
		for _, ext := range []runtime.Object{&v1alpha1.Pizza{}, &v1beta1.Pizza{}} {
			if err := Scheme.Convert(in, ext, nil); err != nil {
				t.Fatal(err)
			}
			back := &restaurant.Pizza{}
			if err := Scheme.Convert(ext, back, nil); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in.Spec, back.Spec) || back.Name != in.Name {
				t.Fatalf("%T round trip: %+v became %+v", ext, in.Spec, back.Spec)
			}
		}
	}
}

// v1alpha1 lists portions by name: repeats are merged into quantities, in
// the order of first appearance, so a v1alpha1 list comes back grouped.
func TestV1alpha1GroupsRepeats(t *testing.T) {
	in := &v1alpha1.Pizza{Spec: v1alpha1.PizzaSpec{Toppings: []string{"tomato", "mozzarella", "salami", "mozzarella"}}}
	hub := &restaurant.Pizza{}
	if err := Scheme.Convert(in, hub, nil); err != nil {
		t.Fatal(err)
	}
	want := []restaurant.PizzaTopping{{Name: "tomato", Quantity: 1}, {Name: "mozzarella", Quantity: 2}, {Name: "salami", Quantity: 1}}
	if !reflect.DeepEqual(hub.Spec.Toppings, want) {
		t.Fatalf("hub: %+v", hub.Spec.Toppings)
	}
	out := &v1alpha1.Pizza{}
	if err := Scheme.Convert(hub, out, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(out.Spec.Toppings, ","); got != "tomato,mozzarella,mozzarella,salami" {
		t.Fatalf("back: %s", got)
	}
}

// Defaults apply when a request body is decoded.
func TestDefaultsOnDecode(t *testing.T) {
	dec := Codecs.UniversalDecoder(restaurant.SchemeGroupVersion)
	for _, tt := range []struct{ body, want string }{
		{`{"apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","kind":"Pizza","metadata":{"name":"m"},"spec":{}}`, "tomato×1 mozzarella×1"},
		{`{"apiVersion":"restaurant.programming-kubernetes.info/v1beta1","kind":"Pizza","metadata":{"name":"m"},"spec":{"toppings":[{"name":"salami"},{"name":"olive","quantity":3}]}}`, "salami×1 olive×3"},
		{`{"apiVersion":"restaurant.programming-kubernetes.info/v1beta1","kind":"Pizza","metadata":{"name":"m"},"spec":{}}`, ""},
	} {
		obj, _, err := dec.Decode([]byte(tt.body), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tp := range obj.(*restaurant.Pizza).Spec.Toppings {
			got = append(got, tp.Name+"×"+string(rune('0'+tp.Quantity)))
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s: %v, want %s", tt.body, got, tt.want)
		}
	}
}
