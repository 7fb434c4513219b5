package client

import (
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// List is one page of a list: the list's metadata (resourceVersion, the
// continue token, remainingItemCount) and the items, each its own
// allocation. It decodes from JSON and, for built-in types, protobuf.
type List[T any] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []T `json:"items"`

	newItem func() T // makes an item to decode into; nil: a new zero T
}

type protoItem interface{ Unmarshal([]byte) error }

// HasProtobuf reports whether the items have a protobuf form, for the rest
// layer to choose what to ask the server for.
func (l *List[T]) HasProtobuf() bool {
	_, ok := l.NewItem().(protoItem)
	return ok
}

// StreamMeta, NewItem and AddItem make a List a [rest.ListStream]: a
// response is decoded into it an item at a time as it arrives.

// StreamMeta returns the list's type and list metadata.
func (l *List[T]) StreamMeta() (*metav1.TypeMeta, *metav1.ListMeta) {
	return &l.TypeMeta, &l.ListMeta
}

// NewItem returns a new item, for the rest layer to decode into: a T when
// T is a pointer type, else a *T.
func (l *List[T]) NewItem() any {
	if l.newItem != nil {
		return l.newItem()
	}
	if t := reflect.TypeFor[T](); t.Kind() == reflect.Pointer {
		return reflect.New(t.Elem()).Interface()
	}
	return new(T)
}

// AddItem appends an item that NewItem returned.
func (l *List[T]) AddItem(item any) {
	if v, ok := item.(T); ok {
		l.Items = append(l.Items, v)
		return
	}
	l.Items = append(l.Items, *item.(*T))
}

// fillKinds gives the items of a list of unstructured objects the
// apiVersion and kind they lack. The API server leaves them out of the
// items of lists of built-in resources (CustomResourceDefinitions, Pods,
// ...); as client-go's unstructured decoding does, each item without them
// takes the list's apiVersion and the list's kind without its "List"
// suffix.
func fillKinds(l *List[*unstructured.Unstructured]) error {
	itemKind := strings.TrimSuffix(l.Kind, "List")
	for i, u := range l.Items {
		if u.GetKind() == "" {
			u.SetKind(itemKind)
		}
		if u.GetAPIVersion() == "" {
			u.SetAPIVersion(l.APIVersion)
		}
		if u.GetKind() == "" {
			return fmt.Errorf("client: list item %d has no kind, nor has the list", i)
		}
	}
	return nil
}
