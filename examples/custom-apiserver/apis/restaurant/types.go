package restaurant

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group served by the example.
const GroupName = "restaurant.programming-kubernetes.info"

// SchemeGroupVersion is the internal version of the group.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// Pizza is an order: a list of toppings, each with a quantity. It is
// namespaced. Every topping must name an existing Topping (the admission
// plugin checks that).
//
// +kubebuilder:object:root=true
type Pizza struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec PizzaSpec
}

// PizzaSpec is what the customer ordered.
type PizzaSpec struct {
	// Toppings in the order given; a name appears at most once.
	Toppings []PizzaTopping
}

// PizzaTopping is a topping and how many portions of it.
type PizzaTopping struct {
	Name     string
	Quantity int
}

// PizzaList is a list of Pizzas.
//
// +kubebuilder:object:root=true
type PizzaList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []Pizza
}

// Topping is something that goes on a pizza, with its price per portion.
// It is cluster-scoped.
//
// +kubebuilder:object:root=true
type Topping struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec ToppingSpec
}

// ToppingSpec is a topping's price.
type ToppingSpec struct {
	// Cost of one portion, in euros.
	Cost float64
}

// ToppingList is a list of Toppings.
//
// +kubebuilder:object:root=true
type ToppingList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []Topping
}

// PizzaPrice is the answer of the pizzas/price subresource: the pizza's
// price computed from the current cost of its toppings. It is never
// stored.
//
// +kubebuilder:object:root=true
type PizzaPrice struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// Total is the sum of the lines.
	Total float64
	// Lines has one entry per topping of the pizza.
	Lines []PriceLine
}

// PriceLine is one topping's share of a PizzaPrice.
type PriceLine struct {
	Topping  string
	Quantity int
	UnitCost float64
	// Missing is true when the Topping no longer exists (it was deleted
	// after the pizza was ordered); it then costs nothing.
	Missing bool
}

// AddToScheme registers the internal types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &Pizza{}, &PizzaList{}, &Topping{}, &ToppingList{}, &PizzaPrice{})
	return nil
}
