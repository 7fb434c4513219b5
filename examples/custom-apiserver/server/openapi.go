package server

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1alpha1"
	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1beta1"
)

// OpenAPI definitions.
//
// k8s.io/apiserver needs an OpenAPI model of every served type: it builds
// the type converter for server-side apply and managed fields from it, and
// publishes /openapi/v2 and /openapi/v3, which kube-apiserver merges into
// its own for kubectl explain. Generated definitions (openapi-gen) are the
// usual way; the example's types are few and small, so they are written
// here by hand instead, and the meta types they refer to (ObjectMeta,
// ListMeta, ...) are taken from kube-aggregator's generated set, which
// includes them.

// The model names of the meta types, as kube-aggregator's definitions
// key them.
var (
	objectMeta = metav1.ObjectMeta{}.OpenAPIModelName()
	listMeta   = metav1.ListMeta{}.OpenAPIModelName()
)

// GetOpenAPIDefinitions returns the definitions of the restaurant types in
// both external versions, and of the meta types.
func GetOpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := aggregatoropenapi.GetOpenAPIDefinitions(ref)
	for _, v := range []string{"v1alpha1", "v1beta1"} {
		p := strings.TrimSuffix(v1alpha1.Pizza{}.OpenAPIModelName(), "Pizza")
		if v == "v1beta1" {
			p = strings.TrimSuffix(v1beta1.Pizza{}.OpenAPIModelName(), "Pizza")
		}
		var pizzaToppings spec.Schema
		var specDeps []string
		if v == "v1alpha1" {
			pizzaToppings = arrayOf(str("Toppings by name; a name given twice is a double portion. Empty means tomato and mozzarella."))
		} else {
			pizzaToppings = arrayOf(refTo(ref, p+"PizzaTopping", ""))
			pizzaToppings.Description = "Each topping once, with its quantity."
			specDeps = []string{p + "PizzaTopping"}
			defs[p+"PizzaTopping"] = def(object("A topping and how many portions of it.", []string{"name"}, map[string]spec.Schema{
				"name":     str("Name of a Topping."),
				"quantity": integer("Quantity in portions; default 1."),
			}))
		}
		defs[p+"Pizza"] = def(root("A Pizza is an order of toppings.", ref, objectMeta, map[string]spec.Schema{
			"spec": refTo(ref, p+"PizzaSpec", ""),
		}), objectMeta, p+"PizzaSpec")
		defs[p+"PizzaSpec"] = def(object("What was ordered.", nil, map[string]spec.Schema{"toppings": pizzaToppings}), specDeps...)
		defs[p+"PizzaList"] = def(list("A list of Pizzas.", ref, p+"Pizza"), listMeta, p+"Pizza")
		defs[p+"Topping"] = def(root("A Topping goes on pizzas, at a cost per portion.", ref, objectMeta, map[string]spec.Schema{
			"spec": refTo(ref, p+"ToppingSpec", ""),
		}), objectMeta, p+"ToppingSpec")
		defs[p+"ToppingSpec"] = def(object("The topping's price.", []string{"cost"}, map[string]spec.Schema{
			"cost": number("Cost of one portion, in euros."),
		}))
		defs[p+"ToppingList"] = def(list("A list of Toppings.", ref, p+"Topping"), listMeta, p+"Topping")
		defs[p+"PizzaPrice"] = def(root("The price of a Pizza, from the current cost of its toppings (the pizzas/price subresource).", ref, objectMeta, map[string]spec.Schema{
			"total": number("Sum of the lines, in euros."),
			"lines": arrayOf(refTo(ref, p+"PriceLine", "")),
		}), objectMeta, p+"PriceLine")
		defs[p+"PriceLine"] = def(object("One topping's share of a price.", []string{"topping", "quantity", "unitCost"}, map[string]spec.Schema{
			"topping":  str("Name of the Topping."),
			"quantity": integer("Portions."),
			"unitCost": number("Cost of one portion, in euros."),
			"missing":  boolean("The Topping no longer exists; it costs nothing."),
		}))
	}
	return defs
}

func def(s spec.Schema, deps ...string) common.OpenAPIDefinition {
	return common.OpenAPIDefinition{Schema: s, Dependencies: deps}
}

func typed(t, format, desc string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{t}, Format: format, Description: desc}}
}

func str(desc string) spec.Schema     { return typed("string", "", desc) }
func integer(desc string) spec.Schema { return typed("integer", "int64", desc) }
func number(desc string) spec.Schema  { return typed("number", "double", desc) }
func boolean(desc string) spec.Schema { return typed("boolean", "", desc) }

func arrayOf(items spec.Schema) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &items}}}
}

func refTo(ref common.ReferenceCallback, name, desc string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name), Description: desc}}
}

func object(desc string, required []string, props map[string]spec.Schema) spec.Schema {
	s := typed("object", "", desc)
	s.Required, s.Properties = required, props
	return s
}

// root is a top-level object: kind, apiVersion, metadata and props.
func root(desc string, ref common.ReferenceCallback, metaType string, props map[string]spec.Schema) spec.Schema {
	all := map[string]spec.Schema{
		"kind":       str("Kind is a string value representing the REST resource this object represents."),
		"apiVersion": str("APIVersion defines the versioned schema of this representation of an object."),
		"metadata":   refTo(ref, metaType, "Standard object metadata."),
	}
	for k, v := range props {
		all[k] = v
	}
	return object(desc, nil, all)
}

func list(desc string, ref common.ReferenceCallback, item string) spec.Schema {
	s := root(desc, ref, listMeta, map[string]spec.Schema{"items": arrayOf(refTo(ref, item, ""))})
	s.Required = []string{"items"}
	return s
}
