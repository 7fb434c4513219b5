package v1beta1

import (
	"fmt"
	"regexp"

	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/webhook"
)

// rfc3339 splits an RFC 3339 time into date, time of day and offset, as
// text: the conversion moves characters, never parses a time, so nothing
// is rounded or normalised and a round trip gives back the same string.
var rfc3339 = regexp.MustCompile(`^([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)(Z|[+-][0-9]{2}:[0-9]{2})$`)

// ConvertTo fills the hub (v1alpha1) from this At.
func (a *At) ConvertTo(h webhook.Hub) error {
	hub, ok := h.(*v1alpha1.At)
	if !ok {
		return fmt.Errorf("v1beta1: the hub is %T, want *v1alpha1.At", h)
	}
	hub.ObjectMeta = a.ObjectMeta
	hub.Spec = v1alpha1.AtSpec{Command: a.Spec.Command, Image: a.Spec.Image}
	if a.Spec.Schedule != (Schedule{}) {
		offset := a.Spec.Schedule.Offset
		if offset == "" {
			offset = "Z"
		}
		hub.Spec.Schedule = a.Spec.Schedule.Date + "T" + a.Spec.Schedule.Time + offset
	}
	hub.Status = a.Status
	return nil
}

// ConvertFrom fills this At from the hub (v1alpha1).
func (a *At) ConvertFrom(h webhook.Hub) error {
	hub, ok := h.(*v1alpha1.At)
	if !ok {
		return fmt.Errorf("v1beta1: the hub is %T, want *v1alpha1.At", h)
	}
	a.ObjectMeta = hub.ObjectMeta
	a.Spec = AtSpec{Command: hub.Spec.Command, Image: hub.Spec.Image}
	if hub.Spec.Schedule != "" {
		m := rfc3339.FindStringSubmatch(hub.Spec.Schedule)
		if m == nil {
			return fmt.Errorf("v1beta1: spec.schedule %q is not an RFC 3339 time", hub.Spec.Schedule)
		}
		a.Spec.Schedule = Schedule{Date: m[1], Time: m[2], Offset: m[3]}
	}
	a.Status = hub.Status
	return nil
}

var _ webhook.Convertible = (*At)(nil)
