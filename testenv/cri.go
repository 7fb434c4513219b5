package testenv

import (
	"context"
	binenc "encoding/binary"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// criClient speaks the few calls of the Container Runtime Interface that
// testenv needs to a real node's containerd: whether it answers, and
// stopping and removing every Pod sandbox before containerd is stopped, so
// that the CNI plugins release each Pod's network (veth, address) and
// containerd unmounts and removes what it made for it. The messages are
// encoded by hand: they are a string field or two.
type criClient struct {
	conn *grpc.ClientConn
}

const criService = "/runtime.v1.RuntimeService/"

func newCRIClient(socket string) (*criClient, error) {
	conn, err := grpc.NewClient("passthrough:///cri",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
	)
	if err != nil {
		return nil, fmt.Errorf("testenv: CRI client for %s: %w", socket, err)
	}
	return &criClient{conn: conn}, nil
}

func (c *criClient) Close() error { return c.conn.Close() }

func (c *criClient) call(ctx context.Context, method string, req []byte) ([]byte, error) {
	var resp []byte
	if err := c.conn.Invoke(ctx, criService+method, &req, &resp); err != nil {
		return nil, fmt.Errorf("CRI %s: %w", method, err)
	}
	return resp, nil
}

// Version asks the runtime's version: it answers once containerd's CRI
// plugin serves.
func (c *criClient) Version(ctx context.Context) error {
	_, err := c.call(ctx, "Version", nil)
	return err
}

// PodSandboxIDs lists every Pod sandbox, ready or not.
func (c *criClient) PodSandboxIDs(ctx context.Context) ([]string, error) {
	resp, err := c.call(ctx, "ListPodSandbox", nil)
	if err != nil {
		return nil, err
	}
	var ids []string
	// ListPodSandboxResponse: repeated PodSandbox items = 1; PodSandbox: string id = 1.
	err = protoFields(resp, func(num int, b []byte) error {
		if num != 1 {
			return nil
		}
		return protoFields(b, func(num int, b []byte) error {
			if num == 1 {
				ids = append(ids, string(b))
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	return ids, nil
}

// StopPodSandbox stops a sandbox's containers and tears down its network.
func (c *criClient) StopPodSandbox(ctx context.Context, id string) error {
	_, err := c.call(ctx, "StopPodSandbox", protoString(1, id))
	return err
}

// RemovePodSandbox removes a stopped sandbox and its containers.
func (c *criClient) RemovePodSandbox(ctx context.Context, id string) error {
	_, err := c.call(ctx, "RemovePodSandbox", protoString(1, id))
	return err
}

// protoString encodes a string field.
func protoString(num int, s string) []byte {
	b := binenc.AppendUvarint(nil, uint64(num)<<3|2)
	b = binenc.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// protoFields calls fn with every length-delimited field of a message, and
// skips the others.
func protoFields(b []byte, fn func(num int, b []byte) error) error {
	for len(b) > 0 {
		key, n := binenc.Uvarint(b)
		if n <= 0 {
			return errors.New("malformed message")
		}
		b = b[n:]
		num, typ := int(key>>3), key&7
		switch typ {
		case 0: // varint
			_, n = binenc.Uvarint(b)
			if n <= 0 {
				return errors.New("malformed varint")
			}
			b = b[n:]
		case 1: // 64-bit
			if len(b) < 8 {
				return errors.New("short message")
			}
			b = b[8:]
		case 5: // 32-bit
			if len(b) < 4 {
				return errors.New("short message")
			}
			b = b[4:]
		case 2:
			l, n := binenc.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return errors.New("malformed length")
			}
			if err := fn(num, b[n:n+int(l)]); err != nil {
				return err
			}
			b = b[n+int(l):]
		default:
			return fmt.Errorf("unsupported wire type %d", typ)
		}
	}
	return nil
}

// rawCodec passes messages that are already encoded.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	p, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return *p, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }
