package testenv

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

//go:embed versions.env
var versionsEnv string

// Versions are the control-plane versions testenv expects, read from the
// embedded versions.env that tools/build.sh (run by `loom assets`) builds
// from.
type Versions struct {
	Kube string // kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
	Etcd string
	Kwok string
}

// PinnedVersions returns the versions pinned in versions.env.
func PinnedVersions() Versions {
	var v Versions
	sc := bufio.NewScanner(strings.NewReader(versionsEnv))
	for sc.Scan() {
		k, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "KUBE_VERSION":
			v.Kube = val
		case "ETCD_VERSION":
			v.Etcd = val
		case "KWOK_VERSION":
			v.Kwok = val
		}
	}
	return v
}

// AssetsDir returns the folder holding the control-plane binaries:
// $LOOM_ASSETS when set, else ${XDG_CACHE_HOME:-$HOME/.cache}/loom/<versions>/bin.
// It is the folder `loom assets` fills and prints.
func AssetsDir() string {
	if d := os.Getenv("LOOM_ASSETS"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	v := PinnedVersions()
	return filepath.Join(base, "loom", fmt.Sprintf("kube-%s_etcd-%s_kwok-%s", v.Kube, v.Etcd, v.Kwok), "bin")
}

// ErrMissingBinary is returned (wrapped in a *MissingBinaryError) when a
// control-plane binary is not in the assets folder.
var ErrMissingBinary = errors.New("control-plane binary missing")

// MissingBinaryError names the binary that was looked for and where, and the
// command that builds it.
type MissingBinaryError struct {
	Name string // e.g. "kube-apiserver"
	Path string // where it was looked for
}

func (e *MissingBinaryError) Error() string {
	return fmt.Sprintf("testenv: %s not found at %s; build the control-plane binaries with `loom assets` "+
		"(go install github.com/loom-k8s/loom/cmd/loom at your Loom version; `make assets` in a Loom checkout), "+
		"or point LOOM_ASSETS at a folder that has them", e.Name, e.Path)
}

func (e *MissingBinaryError) Unwrap() error { return ErrMissingBinary }

// binary returns the path of a control-plane binary in dir, or a
// *MissingBinaryError.
func binary(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	st, err := binaryFile(p)
	if err != nil || st.Mode()&0o111 == 0 {
		return "", &MissingBinaryError{Name: name, Path: p}
	}
	return p, nil
}

// binaryFile stats a regular file.
func binaryFile(p string) (os.FileInfo, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return st, nil
}
