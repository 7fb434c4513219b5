package v1beta1

// modelPrefix names this version's types in OpenAPI documents, in the
// reverse-domain form of Kubernetes' own (io.k8s.api.core.v1.Pod): Go
// package paths contain slashes, which kubectl cannot resolve in
// references.
const modelPrefix = "info.programming-kubernetes.restaurant.v1beta1."

// OpenAPIModelName methods name each type in the OpenAPI documents.
func (Pizza) OpenAPIModelName() string        { return modelPrefix + "Pizza" }
func (PizzaSpec) OpenAPIModelName() string    { return modelPrefix + "PizzaSpec" }
func (PizzaList) OpenAPIModelName() string    { return modelPrefix + "PizzaList" }
func (Topping) OpenAPIModelName() string      { return modelPrefix + "Topping" }
func (ToppingSpec) OpenAPIModelName() string  { return modelPrefix + "ToppingSpec" }
func (ToppingList) OpenAPIModelName() string  { return modelPrefix + "ToppingList" }
func (PizzaPrice) OpenAPIModelName() string   { return modelPrefix + "PizzaPrice" }
func (PriceLine) OpenAPIModelName() string    { return modelPrefix + "PriceLine" }
func (PizzaTopping) OpenAPIModelName() string { return modelPrefix + "PizzaTopping" }
