package v1alpha1

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
)

// ConvertPizzaToInternal merges repeated names into one topping with a
// quantity, in the order of each name's first appearance.
func ConvertPizzaToInternal(in *Pizza, out *restaurant.Pizza) error {
	out.ObjectMeta = in.ObjectMeta
	out.Spec.Toppings = nil
	index := map[string]int{}
	for _, name := range in.Spec.Toppings {
		if i, ok := index[name]; ok {
			out.Spec.Toppings[i].Quantity++
			continue
		}
		index[name] = len(out.Spec.Toppings)
		out.Spec.Toppings = append(out.Spec.Toppings, restaurant.PizzaTopping{Name: name, Quantity: 1})
	}
	return nil
}

// ConvertPizzaFromInternal repeats each topping's name once per portion.
// Stored pizzas have quantities of at least 1 (validation); a smaller one
// is written once, so that the topping is not lost.
func ConvertPizzaFromInternal(in *restaurant.Pizza, out *Pizza) error {
	out.ObjectMeta = in.ObjectMeta
	out.Spec.Toppings = nil
	for _, t := range in.Spec.Toppings {
		for range max(t.Quantity, 1) {
			out.Spec.Toppings = append(out.Spec.Toppings, t.Name)
		}
	}
	return nil
}

func registerConversions(s *runtime.Scheme) error {
	funcs := []struct {
		a, b any
		fn   conversion.ConversionFunc
	}{
		{(*Pizza)(nil), (*restaurant.Pizza)(nil), func(a, b any, _ conversion.Scope) error {
			return ConvertPizzaToInternal(a.(*Pizza), b.(*restaurant.Pizza))
		}},
		{(*restaurant.Pizza)(nil), (*Pizza)(nil), func(a, b any, _ conversion.Scope) error {
			return ConvertPizzaFromInternal(a.(*restaurant.Pizza), b.(*Pizza))
		}},
		{(*PizzaList)(nil), (*restaurant.PizzaList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*PizzaList), b.(*restaurant.PizzaList)
			out.ListMeta = in.ListMeta
			out.Items = make([]restaurant.Pizza, len(in.Items))
			for i := range in.Items {
				if err := ConvertPizzaToInternal(&in.Items[i], &out.Items[i]); err != nil {
					return err
				}
			}
			return nil
		}},
		{(*restaurant.PizzaList)(nil), (*PizzaList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*restaurant.PizzaList), b.(*PizzaList)
			out.ListMeta = in.ListMeta
			out.Items = make([]Pizza, len(in.Items))
			for i := range in.Items {
				if err := ConvertPizzaFromInternal(&in.Items[i], &out.Items[i]); err != nil {
					return err
				}
			}
			return nil
		}},
		{(*Topping)(nil), (*restaurant.Topping)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*Topping), b.(*restaurant.Topping)
			out.ObjectMeta, out.Spec.Cost = in.ObjectMeta, in.Spec.Cost
			return nil
		}},
		{(*restaurant.Topping)(nil), (*Topping)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*restaurant.Topping), b.(*Topping)
			out.ObjectMeta, out.Spec.Cost = in.ObjectMeta, in.Spec.Cost
			return nil
		}},
		{(*ToppingList)(nil), (*restaurant.ToppingList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*ToppingList), b.(*restaurant.ToppingList)
			out.ListMeta = in.ListMeta
			out.Items = make([]restaurant.Topping, len(in.Items))
			for i, t := range in.Items {
				out.Items[i] = restaurant.Topping{ObjectMeta: t.ObjectMeta, Spec: restaurant.ToppingSpec{Cost: t.Spec.Cost}}
			}
			return nil
		}},
		{(*restaurant.ToppingList)(nil), (*ToppingList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*restaurant.ToppingList), b.(*ToppingList)
			out.ListMeta = in.ListMeta
			out.Items = make([]Topping, len(in.Items))
			for i, t := range in.Items {
				out.Items[i] = Topping{ObjectMeta: t.ObjectMeta, Spec: ToppingSpec{Cost: t.Spec.Cost}}
			}
			return nil
		}},
		{(*PizzaPrice)(nil), (*restaurant.PizzaPrice)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*PizzaPrice), b.(*restaurant.PizzaPrice)
			out.ObjectMeta, out.Total, out.Lines = in.ObjectMeta, in.Total, nil
			for _, l := range in.Lines {
				out.Lines = append(out.Lines, restaurant.PriceLine(l))
			}
			return nil
		}},
		{(*restaurant.PizzaPrice)(nil), (*PizzaPrice)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*restaurant.PizzaPrice), b.(*PizzaPrice)
			out.ObjectMeta, out.Total, out.Lines = in.ObjectMeta, in.Total, nil
			for _, l := range in.Lines {
				out.Lines = append(out.Lines, PriceLine(l))
			}
			return nil
		}},
	}
	for _, f := range funcs {
		if err := s.AddConversionFunc(f.a, f.b, f.fn); err != nil {
			return err
		}
	}
	return nil
}
