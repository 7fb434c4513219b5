package v1alpha1

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

// PizzaSpec lists the toppings by name; a name given twice is a double
// portion. Empty means a margherita: tomato and mozzarella.
type PizzaSpec struct {
	Toppings []string `json:"toppings,omitempty"`
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
