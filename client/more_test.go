package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

func TestPagingWithExpiredContinueToken(t *testing.T) {
	rc := newREST(t, rest.Protobuf)
	ns := namespace(t, rc)
	ctx := t.Context()
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	// Only our objects count: kube-controller-manager adds kube-root-ca.crt
	// to every namespace, at a time of its choosing.
	const total = 2500
	ours := func(name string) bool { return strings.HasPrefix(name, "cm-") || name == "zz-after" }
	var wg sync.WaitGroup
	errs := make(chan error, total)
	sem := make(chan struct{}, 16)
	for i := range total {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}}, metav1.CreateOptions{})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	t.Run("pages of 500", func(t *testing.T) {
		pages := 0
		seen := map[string]bool{}
		err := cms.Pages(ctx, metav1.ListOptions{Limit: 500}, func() { t.Error("restarted without an expired token") }, func(p *client.List[*corev1.ConfigMap]) error {
			pages++
			if len(p.Items) > 500 {
				t.Errorf("page of %d", len(p.Items))
			}
			for _, cm := range p.Items {
				if ours(cm.Name) {
					seen[cm.Name] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if pages < total/500 || len(seen) != total {
			t.Fatalf("%d pages, %d distinct objects; want at least %d and %d", pages, len(seen), total/500, total)
		}
		all, err := cms.ListAll(ctx, metav1.ListOptions{Limit: 500})
		if err != nil || len(all.Items) < total || all.ResourceVersion == "" {
			t.Fatalf("ListAll: %d items, rv %q, %v", len(all.Items), all.ResourceVersion, err)
		}
	})

	t.Run("expired continue token", func(t *testing.T) {
		pages, restarts := 0, 0
		seen := map[string]bool{}
		err := cms.Pages(ctx, metav1.ListOptions{Limit: 500}, func() { restarts++; clear(seen) }, func(p *client.List[*corev1.ConfigMap]) error {
			pages++
			for _, cm := range p.Items {
				if ours(cm.Name) {
					seen[cm.Name] = true
				}
			}
			if pages == 1 {
				// Expire the token: compact etcd past the snapshot the
				// pages come from, and restart kube-apiserver so no cache
				// still holds that snapshot.
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "zz-after"}}, metav1.CreateOptions{}); err != nil {
					return err
				}
				if err := shared.Env(t).CompactEtcd(ctx, 0); err != nil {
					return err
				}
				return shared.Env(t).RestartAPIServer(ctx)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if restarts != 1 || pages != 2 {
			t.Fatalf("%d restarts and %d pages; want 1 restart and then one full list", restarts, pages)
		}
		if len(seen) != total+1 || !seen["zz-after"] {
			t.Fatalf("after the restart saw %d objects, want %d including zz-after", len(seen), total+1)
		}
	})
}

func TestWatchAndMetadataClient(t *testing.T) {
	rc := newREST(t, rest.Protobuf)
	ns := namespace(t, rc)
	ctx := t.Context()
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	metas, err := client.For[metav1.PartialObjectMetadata](rc, client.Options{Resource: client.Resource{
		Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespaced: true}})
	if err != nil {
		t.Fatal(err)
	}
	metas = metas.Namespace(ns)
	start, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer typed.Stop()
	meta, err := metas.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Stop()

	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{"l": "1"}}, Data: map[string]string{"big": strings.Repeat("x", 1000)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["big"] = "y"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Events of other ConfigMaps (kube-root-ca.crt, which the control
	// plane may add to a new namespace after the List) are skipped.
	nextTyped := func() (rest.Event[*corev1.ConfigMap], error) {
		for {
			ev, err := typed.Next()
			if err != nil || ev.Object == nil || ev.Object.Name == "w" {
				return ev, err
			}
		}
	}
	nextMeta := func() (rest.Event[*metav1.PartialObjectMetadata], error) {
		for {
			ev, err := meta.Next()
			if err != nil || ev.Object == nil || ev.Object.Name == "w" {
				return ev, err
			}
		}
	}
	want := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}
	for i, w := range want {
		ev, err := nextTyped()
		if err != nil || ev.Type != w || ev.Object.Name != "w" {
			t.Fatalf("typed event %d: %v %v, want %s", i, ev.Type, err, w)
		}
		if w == watch.Added && ev.Object.Data["big"] == "" {
			t.Fatal("typed watch lost the data")
		}
		mev, err := nextMeta()
		if err != nil || mev.Type != w || mev.Object.Name != "w" || mev.Object.Labels["l"] != "1" {
			t.Fatalf("metadata event %d: %+v %v, want %s", i, mev, err, w)
		}
		if mev.Object.Kind != "PartialObjectMetadata" {
			t.Fatalf("metadata watch sent %q, not metadata only", mev.Object.Kind)
		}
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := metas.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range list.Items {
		found = found || m.Name == "m"
	}
	if !found || list.Kind != "PartialObjectMetadataList" {
		t.Fatalf("metadata list: kind %q, %d items, found=%v", list.Kind, len(list.Items), found)
	}
	one, err := metas.Get(ctx, "m", metav1.GetOptions{})
	if err != nil || one.Kind != "PartialObjectMetadata" || one.UID == "" {
		t.Fatalf("metadata get: %+v %v", one, err)
	}
}

func TestPodLogs(t *testing.T) {
	rc := newREST(t, rest.JSON)
	ns := namespace(t, rc)
	ctx := t.Context()
	if err := shared.Env(t).AppendPodLog("first", "second"); err != nil {
		t.Fatal(err)
	}
	pods, _ := client.For[corev1.Pod](rc, client.Options{})
	pods = pods.Namespace(ns)
	spec := podSpec()
	spec.NodeName = "" // scheduled onto the fake node, where kwok runs it
	if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talker"}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		p, err := pods.Get(waitCtx, "talker", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			break
		}
		select {
		case <-waitCtx.Done():
			t.Fatalf("pod never ran: %v", p.Status)
		case <-time.After(100 * time.Millisecond):
		}
	}
	read := func(opts corev1.PodLogOptions) string {
		s, err := client.Logs(ctx, pods, "talker", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		b, err := io.ReadAll(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(corev1.PodLogOptions{}); !strings.HasSuffix(got, "first\nsecond\n") {
		t.Fatalf("logs: %q", got)
	}
	one := int64(1)
	if got := read(corev1.PodLogOptions{TailLines: &one}); got != "second\n" {
		t.Fatalf("tail 1: %q", got)
	}
	if got := read(corev1.PodLogOptions{Timestamps: true, Container: "app"}); !strings.Contains(got, "Z second\n") {
		t.Fatalf("timestamps: %q", got)
	}
	// Follow: a line appended later arrives on the open stream, and
	// cancelling the context ends it.
	fctx, fcancel := context.WithCancel(ctx)
	s, err := client.Logs(fctx, pods, "talker", corev1.PodLogOptions{Follow: true, TailLines: &one})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := bufio.NewReader(s)
	if line, err := r.ReadString('\n'); err != nil || line != "second\n" {
		t.Fatalf("follow first line: %q %v", line, err)
	}
	if err := shared.Env(t).AppendPodLog("third"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "third\n" {
		t.Fatalf("followed line: %q %v", line, err)
	}
	fcancel()
	if _, err := io.ReadAll(r); err == nil {
		t.Fatal("stream did not end with an error after cancel")
	}
	if _, err := client.Logs(ctx, pods, "nobody", corev1.PodLogOptions{}); err == nil {
		t.Fatal("logs of a missing pod succeeded")
	}
}
