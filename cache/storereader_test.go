package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
)

// byOwner indexes Jobs by the name of their controller owner, without
// the namespace: ByIndex scopes the read.
func byOwner(j *batchv1.Job) ([]string, error) {
	if ref := metav1.GetControllerOf(j); ref != nil {
		return []string{ref.Name}, nil
	}
	return nil, nil
}

func job(ns, name, owner string) *batchv1.Job {
	t := true
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: owner, UID: "u", Controller: &t}}}}
}

func jobNames(jobs []*batchv1.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Namespace+"/"+j.Name)
	}
	slices.Sort(out)
	return out
}

func TestStoreReaderByIndex(t *testing.T) {
	store := cache.NewStore(cache.StoreOptions[*batchv1.Job]{Indexers: cache.Indexers[*batchv1.Job]{"owner": byOwner}})
	for _, j := range []*batchv1.Job{job("a", "nightly-1", "nightly"), job("a", "nightly-2", "nightly"), job("b", "nightly-1", "nightly"), job("a", "hourly-1", "hourly")} {
		if err := store.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	var r client.IndexedReader[*batchv1.Job] = cache.StoreReader(store)
	ctx := context.Background()
	for _, c := range []struct {
		ns, value string
		want      []string
	}{
		{"a", "nightly", []string{"a/nightly-1", "a/nightly-2"}},
		{"b", "nightly", []string{"b/nightly-1"}},
		{"", "nightly", []string{"a/nightly-1", "a/nightly-2", "b/nightly-1"}},
		{"a", "hourly", []string{"a/hourly-1"}},
		{"b", "hourly", nil},
		{"a", "weekly", nil},
	} {
		got, err := r.ByIndex(ctx, c.ns, "owner", c.value)
		if err != nil {
			t.Fatalf("ByIndex(%q, owner, %q): %v", c.ns, c.value, err)
		}
		if !slices.Equal(jobNames(got), c.want) {
			t.Errorf("ByIndex(%q, owner, %q) = %v, want %v", c.ns, c.value, jobNames(got), c.want)
		}
	}
	if _, err := r.ByIndex(ctx, "a", "schedule", "x"); !errors.Is(err, cache.ErrNoSuchIndex) {
		t.Errorf("an unknown index: got %v, want ErrNoSuchIndex", err)
	}
}

// A reconciler that looks up the Jobs of a CronJob reads them by index
// through a client.IndexedReader: the manager's cached client in the
// program, a StoreReader over a store filled by hand in its unit test.
func ExampleStoreReader_byIndex() {
	store := cache.NewStore(cache.StoreOptions[*batchv1.Job]{Indexers: cache.Indexers[*batchv1.Job]{"owner": byOwner}})
	_ = store.Add(job("default", "nightly-1", "nightly"))
	_ = store.Add(job("default", "hourly-1", "hourly"))
	_ = store.Add(job("other", "nightly-1", "nightly"))

	var jobs client.IndexedReader[*batchv1.Job] = cache.StoreReader(store)
	owned, err := jobs.ByIndex(context.Background(), "default", "owner", "nightly")
	fmt.Println(jobNames(owned), err)
	// Output: [default/nightly-1] <nil>
}
