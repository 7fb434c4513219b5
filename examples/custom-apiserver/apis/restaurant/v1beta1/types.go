package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pizza is an order of toppings.
//
// +kubebuilder:object:root=true
type Pizza struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PizzaSpec `json:"spec"`
}

// PizzaSpec lists each topping once, with its quantity.
type PizzaSpec struct {
	Toppings []PizzaTopping `json:"toppings,omitempty"`
}

// PizzaTopping is a topping and how many portions of it.
type PizzaTopping struct {
	// Name of a Topping.
	Name string `json:"name"`
	// Quantity in portions; default 1.
	Quantity int `json:"quantity,omitempty"`
}

// PizzaList is a list of Pizzas.
//
// +kubebuilder:object:root=true
type PizzaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Pizza `json:"items"`
}

// Topping is something that goes on a pizza, with its cost per portion.
//
// +kubebuilder:object:root=true
type Topping struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ToppingSpec `json:"spec"`
}

// ToppingSpec is a topping's price.
type ToppingSpec struct {
	// Cost of one portion, in euros.
	Cost float64 `json:"cost"`
}

// ToppingList is a list of Toppings.
//
// +kubebuilder:object:root=true
type ToppingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Topping `json:"items"`
}

// PizzaPrice is the answer of the pizzas/price subresource.
//
// +kubebuilder:object:root=true
type PizzaPrice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Total float64     `json:"total"`
	Lines []PriceLine `json:"lines,omitempty"`
}

// PriceLine is one topping's share of a PizzaPrice.
type PriceLine struct {
	Topping  string  `json:"topping"`
	Quantity int     `json:"quantity"`
	UnitCost float64 `json:"unitCost"`
	Missing  bool    `json:"missing,omitempty"`
}
