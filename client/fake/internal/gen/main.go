// Command gen captures what package fake serves for the built-in kinds
// from a real kube-apiserver: its aggregated discovery (/api and /apis)
// and the OpenAPI v3 schemas of every group version. It starts a testenv
// control plane, asks it, and writes builtin.json.gz (gzipped JSON) into
// the current folder. Run it with `go generate ./client/fake`.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

const acceptAggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// data is the file's content: see package fake's builtin.go.
type data struct {
	Version   string                     `json:"version"`
	Discovery map[string]json.RawMessage `json:"discovery"` // "/api" and "/apis"
	Schemas   map[string]json.RawMessage `json:"schemas"`   // components.schemas of every group version
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, "builtin.json.gz"); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out string) error {
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()
	rc, err := env.REST(rest.Options{})
	if err != nil {
		return err
	}
	d := data{Discovery: map[string]json.RawMessage{}, Schemas: map[string]json.RawMessage{}}
	var ver struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := rc.Get().AbsPath("/version").Do(ctx, &ver); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	d.Version = ver.GitVersion
	for _, p := range []string{"/api", "/apis"} {
		res, err := rc.Get().AbsPath(p).Header("Accept", acceptAggregated).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		var raw json.RawMessage
		if err := res.Into(&raw); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		d.Discovery[p] = compact(raw)
	}
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := getJSON(ctx, rc.Get().AbsPath("/openapi/v3"), &root); err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	var paths []string
	for p := range root.Paths {
		if p == "api/v1" || strings.HasPrefix(p, "apis/") && strings.Count(p, "/") == 2 {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		var doc struct {
			Components struct {
				Schemas map[string]json.RawMessage `json:"schemas"`
			} `json:"components"`
		}
		u := root.Paths[p].ServerRelativeURL
		path, query, _ := strings.Cut(u, "?")
		req := rc.Get().AbsPath(path)
		if h, ok := strings.CutPrefix(query, "hash="); ok {
			req = req.Param("hash", h)
		}
		if err := getJSON(ctx, req, &doc); err != nil {
			return fmt.Errorf("openapi %s: %w", p, err)
		}
		for name, s := range doc.Components.Schemas {
			d.Schemas[name] = compact(s)
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		return err
	}
	log.Printf("%s: %d group versions, %d schemas, %d bytes (%d gzipped)", d.Version, len(paths), len(d.Schemas), len(b), buf.Len())
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

func getJSON(ctx context.Context, req *rest.Request, v any) error {
	res, err := req.Header("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(res.Body, v)
}

func compact(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}
