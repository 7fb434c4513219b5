package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"
)

// ErrFileLocked is returned (wrapped) by [UpdateAuthProviderConfig] when
// another writer held the kubeconfig's lock file for longer than
// [LockWait].
var ErrFileLocked = errors.New("the kubeconfig is locked by another writer (if no kubectl or Loom process is writing it, remove the .lock file)")

// LockWait is how long [UpdateAuthProviderConfig] waits for another
// writer's lock file to go away.
const LockWait = 10 * time.Second

// UpdateAuthProviderConfig sets values in users[user].user.auth-provider.config
// of the kubeconfig file at path, as kubectl does when an auth provider
// refreshes its tokens. Nothing else in the file changes: other users, other
// keys of that provider, fields Loom does not know, comments and the order
// of keys are kept. The file is re-indented (two spaces), and a JSON file
// stays JSON.
//
// The file is replaced atomically: the new content goes to a temporary
// file in the same directory, with the old file's permissions, which is
// then renamed over it. If path is a symbolic link, its target is replaced.
// While it reads and writes, UpdateAuthProviderConfig holds path + ".lock",
// the lock file kubectl uses; if another writer holds it, it waits up to
// [LockWait] (or until ctx ends), then fails with an error wrapping
// [ErrFileLocked].
//
// Errors are [*Error] values naming the file and the field. A user that is
// missing from the file, or that has no auth-provider there, is an error
// and the file is left as it was. Values are never part of an error.
func UpdateAuthProviderConfig(ctx context.Context, path, user string, values map[string]string) error {
	field := fmt.Sprintf("users[%q].auth-provider.config", user)
	unlock, err := lockKubeconfig(ctx, path)
	if err != nil {
		return fieldErr(path, field, err)
	}
	defer unlock()
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fieldErr(path, field, err)
	}
	info, err := os.Stat(target)
	if err != nil {
		return fieldErr(path, field, err)
	}
	data, err := os.ReadFile(target)
	if err != nil {
		return fieldErr(path, field, err)
	}
	out, changed, err := setAuthProviderConfig(data, user, values)
	if err != nil {
		return fieldErr(path, field, err)
	}
	if !changed {
		return nil
	}
	if err := writeFileAtomic(target, out, info.Mode().Perm()); err != nil {
		return fieldErr(path, field, err)
	}
	return nil
}

// lockKubeconfig creates path + ".lock" exclusively, as kubectl does
// around its writes, and returns the function that removes it.
func lockKubeconfig(ctx context.Context, path string) (unlock func(), err error) {
	lock := path + ".lock"
	ctx, cancel := context.WithTimeout(ctx, LockWait)
	defer cancel()
	pause := 10 * time.Millisecond
	for {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(lock) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock file: %w", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s: %w", lock, ErrFileLocked)
		case <-t.C:
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// setAuthProviderConfig edits the YAML (or JSON) document data in place and
// reports whether any value changed.
func setAuthProviderConfig(data []byte, user string, values map[string]string) (out []byte, changed bool, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, false, fmt.Errorf("malformed kubeconfig: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, false, errors.New("the file is not a kubeconfig mapping")
	}
	users := mapValue(doc.Content[0], "users")
	if users == nil || users.Kind != yaml.SequenceNode {
		return nil, false, fmt.Errorf("user %q is not in the file", user)
	}
	var entry *yaml.Node
	for _, item := range users.Content {
		if item.Kind == yaml.MappingNode {
			if n := mapValue(item, "name"); n != nil && n.Kind == yaml.ScalarNode && n.Value == user {
				entry = item
				break
			}
		}
	}
	if entry == nil {
		return nil, false, fmt.Errorf("user %q is not in the file", user)
	}
	provider := mapValue(mapValue(entry, "user"), "auth-provider")
	if provider == nil || provider.Kind != yaml.MappingNode {
		return nil, false, fmt.Errorf("user %q has no auth-provider in the file", user)
	}
	if provider.Anchor != "" {
		return nil, false, errors.New("the auth-provider is a YAML anchor shared with other entries; not rewriting it")
	}
	cfg := mapValue(provider, "config")
	switch {
	case cfg == nil:
		cfg = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		provider.Content = append(provider.Content, strNode("config"), cfg)
	case cfg.Kind == yaml.ScalarNode && cfg.ShortTag() == "!!null":
		*cfg = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: cfg.Style}
	case cfg.Kind != yaml.MappingNode:
		return nil, false, errors.New("config is not a mapping")
	case cfg.Anchor != "":
		return nil, false, errors.New("config is a YAML anchor shared with other entries; not rewriting it")
	}
	for _, k := range sortedKeys(values) {
		v := values[k]
		n := mapValue(cfg, k)
		switch {
		case n == nil:
			cfg.Content = append(cfg.Content, strNode(k), strNode(v))
			changed = true
		case n.Kind != yaml.ScalarNode:
			return nil, false, fmt.Errorf("config.%s is not a string", k)
		case n.Value != v || n.ShortTag() != "!!str":
			n.Tag, n.Value = "!!str", v
			if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
				n.Style = 0
			}
			changed = true
		}
	}
	if !changed {
		return data, false, nil
	}
	var buf bytes.Buffer
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' && !hasAlias(&doc) {
		if err := writeJSON(&buf, &doc); err != nil {
			return nil, false, err
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, buf.Bytes(), "", "  "); err != nil {
			return nil, false, err
		}
		indented.WriteByte('\n')
		return indented.Bytes(), true, nil
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, false, err
	}
	if err := enc.Close(); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), true, nil
}

// mapValue returns the value of key in mapping m (following aliases), or
// nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m != nil && m.Kind == yaml.AliasNode {
		m = m.Alias
	}
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// hasAlias reports whether the tree under n uses a YAML alias (which JSON
// cannot hold, and which writeJSON would have to expand).
func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		return true
	}
	return slices.ContainsFunc(n.Content, hasAlias)
}

// writeJSON writes a YAML node tree read from a JSON file (so without
// aliases) back as JSON, keeping the order of keys.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(b, n.Content[0])
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		j, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(j)
	default:
		return fmt.Errorf("unexpected YAML node kind %v", n.Kind)
	}
	return nil
}

// writeFileAtomic replaces path with data: a temporary file in the same
// directory, given perm, synced, then renamed over path.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		// Make the rename itself durable; not every file system can.
		_ = d.Sync()
		d.Close()
	}
	return nil
}
