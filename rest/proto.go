package rest

import (
	"bytes"
	"errors"
	"fmt"
)

// A minimal protobuf reader for the two envelopes the API server wraps
// objects in: metav1.WatchEvent {1: type, 2: RawExtension{1: raw}} and
// runtime.Unknown {1: TypeMeta{1: apiVersion, 2: kind}, 2: raw,
// 3: contentEncoding, 4: contentType}. It returns sub-slices of its input
// and never copies the object bytes.

var (
	errTruncated = errors.New("truncated protobuf")
	errVarint    = errors.New("malformed protobuf varint")
	errNoMagic   = errors.New("protobuf object does not start with the k8s\\x00 prefix")
)

type unknown struct {
	apiVersion, kind string
	raw              []byte
	contentEncoding  string
}

func readVarint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		v |= uint64(c&0x7f) << (7 * uint(i))
		if c < 0x80 {
			if i == 9 && c > 1 {
				return 0, 0, errVarint
			}
			return v, i + 1, nil
		}
	}
	if len(b) < 10 {
		return 0, 0, errTruncated
	}
	return 0, 0, errVarint
}

// protoFields calls fn for every field of the message in b. For
// length-delimited fields (wire type 2) data is the payload; for varints it
// is nil. Other wire types are skipped.
func protoFields(b []byte, fn func(num uint64, data []byte) error) error {
	for len(b) > 0 {
		key, n, err := readVarint(b)
		if err != nil {
			return err
		}
		b = b[n:]
		num, wt := key>>3, key&7
		if num == 0 {
			return fmt.Errorf("protobuf field number 0")
		}
		switch wt {
		case 0:
			_, n, err := readVarint(b)
			if err != nil {
				return err
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return errTruncated
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return errTruncated
			}
			b = b[4:]
		case 2:
			l, n, err := readVarint(b)
			if err != nil {
				return err
			}
			b = b[n:]
			if l > uint64(len(b)) {
				return errTruncated
			}
			if err := fn(num, b[:l]); err != nil {
				return err
			}
			b = b[l:]
		default:
			return fmt.Errorf("unsupported protobuf wire type %d", wt)
		}
	}
	return nil
}

// parseUnknown parses a magic-prefixed runtime.Unknown.
func parseUnknown(b []byte) (unknown, error) {
	var u unknown
	if !bytes.HasPrefix(b, protoMagic) {
		return u, errNoMagic
	}
	err := protoFields(b[len(protoMagic):], func(num uint64, data []byte) error {
		switch num {
		case 1:
			return parseTypeMeta(data, &u.apiVersion, &u.kind)
		case 2:
			u.raw = data
		case 3:
			u.contentEncoding = string(data)
		}
		return nil
	})
	return u, err
}

// parseTypeMeta parses an envelope's runtime.TypeMeta into apiVersion
// and kind.
func parseTypeMeta(b []byte, apiVersion, kind *string) error {
	return protoFields(b, func(num uint64, data []byte) error {
		switch num {
		case 1:
			*apiVersion = internString(data)
		case 2:
			*kind = internString(data)
		}
		return nil
	})
}

// parseWatchEvent parses a metav1.WatchEvent and returns its type and the
// raw bytes of the embedded object.
func parseWatchEvent(b []byte) (typ string, obj []byte, err error) {
	err = protoFields(b, func(num uint64, data []byte) error {
		switch num {
		case 1:
			typ = internString(data)
		case 2:
			return protoFields(data, func(num uint64, data []byte) error {
				if num == 1 {
					obj = data
				}
				return nil
			})
		}
		return nil
	})
	return typ, obj, err
}

// internString returns well-known short strings without allocating.
func internString(b []byte) string {
	switch string(b) {
	case "ADDED":
		return "ADDED"
	case "MODIFIED":
		return "MODIFIED"
	case "DELETED":
		return "DELETED"
	case "BOOKMARK":
		return "BOOKMARK"
	case "ERROR":
		return "ERROR"
	case "v1":
		return "v1"
	case "Pod":
		return "Pod"
	case "Status":
		return "Status"
	}
	return string(b)
}
