package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// devRegistry is the image registry `loom dev up` serves next to its
// control plane, so that `loom build image --dev-registry` (or --push to
// its address) has somewhere to put images. It listens on 127.0.0.1 only,
// over plain HTTP, with no authentication. Blobs are files under the
// state folder; tags and manifests live in memory, so every image is gone
// at `loom dev down`, and the blob folder is removed then too.
type devRegistry struct {
	Addr string // host:port, such as 127.0.0.1:5001
	srv  *http.Server
	dir  string
	done chan error
}

// registryDir is where a dev registry keeps its blobs.
func registryDir(stateDir string) string { return filepath.Join(stateDir, "registry") }

// startDevRegistry serves a registry on 127.0.0.1:port (0: a free port),
// with its blobs under stateDir. Requests are logged at debug level.
func startDevRegistry(stateDir string, port int, logger *slog.Logger) (*devRegistry, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("%w: --registry-port %d: want 0 (a free port) to 65535", errUsage, port)
	}
	dir := registryDir(stateDir)
	// What an earlier run left is unreachable: its manifests are gone.
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("dev registry: %w", err)
	}
	blobs := filepath.Join(dir, "blobs")
	if err := os.MkdirAll(blobs, 0o700); err != nil {
		return nil, fmt.Errorf("dev registry: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("dev registry: %w (pick another port with --registry-port, or 0 for any free one)", err)
	}
	reqLog := log.New(io.Discard, "", 0)
	if logger != nil && logger.Enabled(context.Background(), slog.LevelDebug) {
		reqLog = slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	}
	h := registry.New(registry.Logger(reqLog), registry.WithBlobHandler(registry.NewDiskBlobHandler(blobs)))
	r := &devRegistry{
		Addr: ln.Addr().String(),
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: reqLog},
		dir:  dir,
		done: make(chan error, 1),
	}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the registry and removes its blobs.
func (r *devRegistry) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Shutdown counts a connection that never sent a request as busy
		// for its first 5 seconds: close what is left rather than fail.
		err = r.srv.Close()
	}
	if serveErr := <-r.done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	if rmErr := os.RemoveAll(r.dir); err == nil {
		err = rmErr
	}
	return err
}

// probeRegistry asks a registry's /v2/ endpoint whether it serves.
func probeRegistry(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/v2/ answered %s", resp.Status)
	}
	return nil
}

// printRegistryStatus adds the dev registry's line to `loom dev status`.
func printRegistryStatus(out io.Writer, st devState) {
	if st.Registry == "" {
		return
	}
	state := "serving"
	if err := probeRegistry(context.Background(), st.Registry); err != nil {
		state = "not answering: " + err.Error()
	}
	fmt.Fprintf(out, "  registry    %s (%s; push with loom build image --dev-registry, or --push --tag %s/NAME:TAG)\n", st.Registry, state, st.Registry)
}
