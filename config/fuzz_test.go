package config

import (
	"errors"
	"testing"
)

// FuzzParse checks that no input makes Parse (or resolving its result)
// panic, and that every failure is a *Error. Seeds live in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{fileA, fileB, fileNoCurrent, "", "{}", "clusters: 7", "users:\n- name: u\n  user: {exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kc, err := Parse(data, "/fuzz/kubeconfig")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error %v is %T, not *config.Error", err, err)
			}
			return
		}
		for name := range kc.Contexts {
			_, _ = kc.Resolve(Overrides{Context: name})
		}
		_, _ = kc.Resolve(Overrides{})
		if _, err := kc.Marshal(); err != nil {
			t.Fatalf("Marshal of parsed config: %v", err)
		}
	})
}
