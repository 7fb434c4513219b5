package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
)

// SchemeGroupVersion is restaurant.programming-kubernetes.info/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: restaurant.GroupName, Version: "v1alpha1"}

// AddToScheme registers the types, their defaults and their conversions to
// and from the internal version.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &Pizza{}, &PizzaList{}, &Topping{}, &ToppingList{}, &PizzaPrice{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	s.AddTypeDefaultingFunc(&Pizza{}, func(o any) { SetDefaultsPizza(o.(*Pizza)) })
	s.AddTypeDefaultingFunc(&PizzaList{}, func(o any) {
		for i := range o.(*PizzaList).Items {
			SetDefaultsPizza(&o.(*PizzaList).Items[i])
		}
	})
	return registerConversions(s)
}

// DefaultToppings are the toppings of a v1alpha1 Pizza that names none: a
// margherita.
var DefaultToppings = []string{"tomato", "mozzarella"}

// SetDefaultsPizza gives a Pizza without toppings the DefaultToppings.
func SetDefaultsPizza(p *Pizza) {
	if len(p.Spec.Toppings) == 0 {
		p.Spec.Toppings = append([]string(nil), DefaultToppings...)
	}
}
