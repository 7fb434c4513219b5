package client

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/internal/intern"
	"github.com/loom-k8s/loom/internal/jsondec"
	"github.com/loom-k8s/loom/internal/protodec"
)

// List is one page of a list: the list's metadata (resourceVersion, the
// continue token, remainingItemCount) and the items, each its own
// allocation. It decodes from JSON and, for built-in types, protobuf.
type List[T any] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []T `json:"items"`

	newItem func() T       // protobuf decoding only
	decode  intern.Options // how Loom's decoder reads the items (an informer's sharing)
}

type protoItem interface{ Unmarshal([]byte) error }

// HasProtobuf reports whether the items have a protobuf form; the rest
// layer asks, since List itself always has an Unmarshal method.
func (l *List[T]) HasProtobuf() bool {
	if l.newItem == nil {
		return false
	}
	_, ok := any(l.newItem()).(protoItem)
	return ok
}

// Unmarshal decodes the protobuf form of a list: field 1 is the ListMeta,
// field 2 repeats the items. Other fields are skipped.
func (l *List[T]) Unmarshal(data []byte) error {
	if l.newItem == nil {
		return errors.New("client: List has no item constructor; protobuf lists are decoded by Client.List")
	}
	l.Items = l.Items[:0]
	for len(data) > 0 {
		key, n := uvarint(data)
		if n <= 0 {
			return errors.New("client: protobuf list: bad field key")
		}
		data = data[n:]
		field, wire := key>>3, key&7
		switch wire {
		case 0: // varint
			_, n := uvarint(data)
			if n <= 0 {
				return errors.New("client: protobuf list: bad varint")
			}
			data = data[n:]
			continue
		case 1: // 64-bit
			if len(data) < 8 {
				return errors.New("client: protobuf list: truncated")
			}
			data = data[8:]
			continue
		case 5: // 32-bit
			if len(data) < 4 {
				return errors.New("client: protobuf list: truncated")
			}
			data = data[4:]
			continue
		case 2: // length-delimited, below
		default:
			return fmt.Errorf("client: protobuf list: unsupported wire type %d", wire)
		}
		size, n := uvarint(data)
		if n <= 0 || size > uint64(len(data)-n) {
			return errors.New("client: protobuf list: truncated field")
		}
		msg := data[n : n+int(size)]
		data = data[n+int(size):]
		switch field {
		case 1:
			if err := l.ListMeta.Unmarshal(msg); err != nil {
				return fmt.Errorf("client: protobuf list metadata: %w", err)
			}
		case 2:
			item := l.newItem()
			pi, ok := any(item).(protoItem)
			if !ok {
				return fmt.Errorf("client: %T has no protobuf form", item)
			}
			var err error
			if protodec.SupportedPointer(item) {
				// Loom's decoder, as for watch events: the item's
				// strings in blocks of its own, parts shared when an
				// informer asks.
				err = protodec.UnmarshalWith(msg, item, l.decode)
			} else {
				err = pi.Unmarshal(msg)
			}
			if err != nil {
				return fmt.Errorf("client: protobuf list item %d: %w", len(l.Items), err)
			}
			l.Items = append(l.Items, item)
		}
	}
	return nil
}

// uvarint decodes a protobuf varint; n <= 0 means malformed.
func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// unstructuredList decodes a JSON list into a List of unstructured
// objects. The API server leaves apiVersion and kind out of the items of
// lists of built-in resources (CustomResourceDefinitions, Pods, ...); as
// client-go's unstructured decoding does, each item without them takes the
// list's apiVersion and the list's kind without its "List" suffix.
type unstructuredList struct {
	l *List[*unstructured.Unstructured]
}

func (u *unstructuredList) UnmarshalJSON(data []byte) error {
	m, err := jsondec.ObjectWith(data, u.l.decode)
	if err != nil {
		return err
	}
	l := u.l
	l.APIVersion, _ = m["apiVersion"].(string)
	l.Kind, _ = m["kind"].(string)
	if md, ok := m["metadata"].(map[string]any); ok {
		l.ResourceVersion, _ = md["resourceVersion"].(string)
		l.Continue, _ = md["continue"].(string)
		if n, ok := md["remainingItemCount"].(int64); ok {
			l.RemainingItemCount = &n
		}
	}
	items, _ := m["items"].([]any)
	l.Items = make([]*unstructured.Unstructured, 0, len(items))
	itemKind := strings.TrimSuffix(l.Kind, "List")
	for i, it := range items {
		obj, ok := it.(map[string]any)
		if !ok {
			return fmt.Errorf("client: list item %d is not an object", i)
		}
		if k, _ := obj["kind"].(string); k == "" {
			obj["kind"] = itemKind
		}
		if v, _ := obj["apiVersion"].(string); v == "" {
			obj["apiVersion"] = l.APIVersion
		}
		if k, _ := obj["kind"].(string); k == "" {
			return fmt.Errorf("client: list item %d has no kind, nor has the list", i)
		}
		l.Items = append(l.Items, &unstructured.Unstructured{Object: obj})
	}
	return nil
}
