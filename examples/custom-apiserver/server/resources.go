package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
)

// Pizzas describes the pizzas resource.
func Pizzas() Resource {
	return Resource{
		Resource: "pizzas", Singular: "pizza", Kind: "Pizza", ShortNames: []string{"pz"},
		Namespaced: true,
		New:        func() runtime.Object { return &restaurant.Pizza{} },
		NewList:    func() runtime.Object { return &restaurant.PizzaList{} },
		Validate:   func(obj, _ runtime.Object) field.ErrorList { return ValidatePizza(obj.(*restaurant.Pizza)) },
		SpecEqual: func(a, b runtime.Object) bool {
			return apiequality.Semantic.DeepEqual(a.(*restaurant.Pizza).Spec, b.(*restaurant.Pizza).Spec)
		},
		Table: table{
			columns: []metav1.TableColumnDefinition{
				{Name: "Name", Type: "string", Format: "name", Description: "Name of the pizza"},
				{Name: "Toppings", Type: "string", Description: "Toppings, with their quantity when more than one"},
				{Name: "Age", Type: "date", Description: "Time since creation"},
			},
			cells: func(o runtime.Object) []any {
				p := o.(*restaurant.Pizza)
				var ts []string
				for _, t := range p.Spec.Toppings {
					if t.Quantity > 1 {
						ts = append(ts, fmt.Sprintf("%s×%d", t.Name, t.Quantity))
					} else {
						ts = append(ts, t.Name)
					}
				}
				return []any{p.Name, strings.Join(ts, ", "), age(p.CreationTimestamp)}
			},
		},
	}
}

// Toppings describes the toppings resource.
func Toppings() Resource {
	return Resource{
		Resource: "toppings", Singular: "topping", Kind: "Topping", ShortNames: []string{"tp"},
		New:      func() runtime.Object { return &restaurant.Topping{} },
		NewList:  func() runtime.Object { return &restaurant.ToppingList{} },
		Validate: func(obj, _ runtime.Object) field.ErrorList { return ValidateTopping(obj.(*restaurant.Topping)) },
		SpecEqual: func(a, b runtime.Object) bool {
			return a.(*restaurant.Topping).Spec == b.(*restaurant.Topping).Spec
		},
		Table: table{
			columns: []metav1.TableColumnDefinition{
				{Name: "Name", Type: "string", Format: "name", Description: "Name of the topping"},
				{Name: "Cost", Type: "number", Description: "Cost of one portion, in euros"},
				{Name: "Age", Type: "date", Description: "Time since creation"},
			},
			cells: func(o runtime.Object) []any {
				t := o.(*restaurant.Topping)
				return []any{t.Name, strconv.FormatFloat(t.Spec.Cost, 'f', 2, 64), age(t.CreationTimestamp)}
			},
		},
	}
}

// ValidatePizza checks a pizza's toppings: named, each once, with a
// quantity from 1 to 10. Whether the toppings exist is the admission
// plugin's business.
func ValidatePizza(p *restaurant.Pizza) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "toppings")
	seen := map[string]bool{}
	for i, t := range p.Spec.Toppings {
		switch {
		case t.Name == "":
			errs = append(errs, field.Required(path.Index(i).Child("name"), "a topping needs a name"))
		case seen[t.Name]:
			errs = append(errs, field.Duplicate(path.Index(i).Child("name"), t.Name))
		}
		seen[t.Name] = true
		if t.Quantity < 1 || t.Quantity > 10 {
			errs = append(errs, field.Invalid(path.Index(i).Child("quantity"), t.Quantity, "must be from 1 to 10 portions"))
		}
	}
	return errs
}

// ValidateTopping checks that a topping's cost is not negative.
func ValidateTopping(t *restaurant.Topping) field.ErrorList {
	if t.Spec.Cost < 0 {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "cost"), t.Spec.Cost, "must not be negative")}
	}
	return nil
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(metav1.Now().Sub(t.Time))
}

// table renders objects and lists as a metav1.Table.
type table struct {
	columns []metav1.TableColumnDefinition
	cells   func(runtime.Object) []any
}

func (t table) ConvertToTable(_ context.Context, obj, _ runtime.Object) (*metav1.Table, error) {
	out := &metav1.Table{ColumnDefinitions: t.columns}
	objs := []runtime.Object{obj}
	if meta.IsListType(obj) {
		var err error
		if objs, err = meta.ExtractList(obj); err != nil {
			return nil, err
		}
		lm, err := meta.ListAccessor(obj)
		if err != nil {
			return nil, err
		}
		out.ResourceVersion, out.Continue = lm.GetResourceVersion(), lm.GetContinue()
	} else if m, err := meta.Accessor(obj); err == nil {
		out.ResourceVersion = m.GetResourceVersion()
	}
	for _, o := range objs {
		out.Rows = append(out.Rows, metav1.TableRow{Cells: t.cells(o), Object: runtime.RawExtension{Object: o}})
	}
	return out, nil
}

// PriceREST serves pizzas/price: the price of a pizza computed from the
// current cost of its toppings. It is read-only and never stored, which a
// CustomResourceDefinition could not offer (its only subresources are
// status and scale).
type PriceREST struct {
	Pizzas, Toppings *Store
}

var (
	_ rest.Getter  = (*PriceREST)(nil)
	_ rest.Storage = (*PriceREST)(nil)
)

func (r *PriceREST) New() runtime.Object { return &restaurant.PizzaPrice{} }
func (r *PriceREST) Destroy()            {}

// Get prices the pizza name in the request's namespace.
func (r *PriceREST) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	o, err := r.Pizzas.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	p := o.(*restaurant.Pizza)
	price := &restaurant.PizzaPrice{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, CreationTimestamp: p.CreationTimestamp,
	}}
	for _, t := range p.Spec.Toppings {
		line := restaurant.PriceLine{Topping: t.Name, Quantity: t.Quantity}
		if to, err := r.Toppings.Get(ctx, t.Name, nil); err == nil {
			line.UnitCost = to.(*restaurant.Topping).Spec.Cost
		} else {
			line.Missing = true
		}
		price.Lines = append(price.Lines, line)
		price.Total += line.UnitCost * float64(line.Quantity)
	}
	return price, nil
}
