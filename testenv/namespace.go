package testenv

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Namespace creates a namespace for one test and returns its name: the
// test's name in lower case, cut to 40 characters, then a random suffix,
// so that tests sharing a control plane (see [Shared]) each have their
// own. The test's cleanup deletes it. With [Options.Controllers] off
// nothing empties a deleted namespace: it stays Terminating with its
// objects, and no later test is given its name.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := namespaceName(t.Name())
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, msg, err := e.adminCall(ctx, http.MethodPost, "/api/v1/namespaces", "application/json", body)
	if err == nil && code != http.StatusCreated {
		err = fmt.Errorf("%d: %s", code, msg)
	}
	if err != nil {
		t.Fatalf("testenv: create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code, msg, err := e.adminCall(ctx, http.MethodDelete, "/api/v1/namespaces/"+name, "", nil)
		if err == nil && code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNotFound {
			err = fmt.Errorf("%d: %s", code, msg)
		}
		if err != nil {
			t.Errorf("testenv: delete namespace %s: %v", name, err)
		}
	})
	return name
}

// namespaceName makes a namespace name (a DNS label) from a test's name.
func namespaceName(test string) string {
	var b strings.Builder
	dash := true // no leading dash
	for _, r := range strings.ToLower(test) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = letters[rand.IntN(len(letters))]
	}
	return cmp.Or(strings.TrimRight(b.String(), "-"), "test") + "-" + string(suffix)
}
