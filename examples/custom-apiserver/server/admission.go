package server

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/admission"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
)

// ToppingsPluginName is the name of the admission plugin that checks a
// Pizza's toppings.
const ToppingsPluginName = "PizzaToppings"

// ToppingsPlugin is a validating admission plugin: a Pizza may only name
// Toppings that exist. On update, only toppings that the update adds are
// checked, so a pizza whose topping was since deleted can still be
// labelled or deleted.
//
// It reads the toppings straight from their Store: the plugin runs in the
// same process as the storage, so it needs no client, informer or cache
// (a server with etcd storage would use an informer on a loopback client
// instead).
type ToppingsPlugin struct {
	*admission.Handler
	Toppings *Store
}

var _ admission.ValidationInterface = (*ToppingsPlugin)(nil)

// RegisterToppingsPlugin registers the plugin in plugins, reading from
// toppings.
func RegisterToppingsPlugin(plugins *admission.Plugins, toppings *Store) {
	plugins.Register(ToppingsPluginName, func(io.Reader) (admission.Interface, error) {
		return &ToppingsPlugin{Handler: admission.NewHandler(admission.Create, admission.Update), Toppings: toppings}, nil
	})
}

// Validate refuses a Pizza that names a missing Topping.
func (p *ToppingsPlugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetKind().GroupKind() != restaurant.SchemeGroupVersion.WithKind("Pizza").GroupKind() || a.GetSubresource() != "" {
		return nil
	}
	pizza, ok := a.GetObject().(*restaurant.Pizza)
	if !ok {
		return fmt.Errorf("PizzaToppings: unexpected object %T", a.GetObject())
	}
	had := map[string]bool{}
	if old, ok := a.GetOldObject().(*restaurant.Pizza); ok {
		for _, t := range old.Spec.Toppings {
			had[t.Name] = true
		}
	}
	var missing []string
	for _, t := range pizza.Spec.Toppings {
		if had[t.Name] {
			continue
		}
		if _, err := p.Toppings.Get(ctx, t.Name, nil); err != nil {
			missing = append(missing, fmt.Sprintf("%q", t.Name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return admission.NewForbidden(a, fmt.Errorf("not on the menu: %s (a Pizza may only use existing Toppings; create them first)", strings.Join(missing, ", ")))
}
