package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/discovery"
)

func init() {
	commands["logs"] = command{"print or follow a pod's log (as kubectl logs)", runLogs}
	commands["scale"] = command{"set the replicas of anything with a scale subresource (as kubectl scale)", runScale}
}

// runLogs prints a pod's log: loom logs POD [-c CONTAINER] [-f] [--tail N]
// [--since DURATION] [--timestamps] [-p].
func runLogs(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom logs", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	container := fs.String("c", "", "container (required when the pod has several)")
	follow := fs.Bool("f", false, "follow the log")
	tail := fs.Int64("tail", -1, "lines from the end to show (-1: all)")
	since := fs.Duration("since", 0, "only lines newer than this (e.g. 5m)")
	timestamps := fs.Bool("timestamps", false, "prefix each line with its time")
	previous := fs.Bool("p", false, "the previous instance of the container")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: loom logs takes one pod name", errUsage)
	}
	rc, cfg, err := conn.client()
	if err != nil {
		return err
	}
	pods, err := client.For[corev1.Pod](rc, client.Options{})
	if err != nil {
		return err
	}
	opts := corev1.PodLogOptions{Container: *container, Follow: *follow, Timestamps: *timestamps, Previous: *previous}
	if *tail >= 0 {
		opts.TailLines = tail
	}
	if *since > 0 {
		s := int64(*since / time.Second)
		opts.SinceSeconds = &s
	}
	stream, err := client.Logs(ctx, pods.Namespace(cfg.Namespace), pos[0], opts)
	if err != nil {
		return err
	}
	defer stream.Close()
	if _, err := io.Copy(out, stream); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return err
	}
	return nil
}

// runScale sets replicas: loom scale RESOURCE NAME --replicas N
// [--resource-version RV]; RESOURCE is any name kubectl accepts.
func runScale(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom scale", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	replicas := fs.Int("replicas", -1, "the new number of replicas (required)")
	rv := fs.String("resource-version", "", "only scale if the object's resourceVersion is still this")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		if r, n, ok := cutSlash(pos[0]); ok { // deployment/web, as kubectl accepts
			pos = []string{r, n}
		}
	}
	if len(pos) != 2 || *replicas < 0 {
		return fmt.Errorf("%w: usage: loom scale RESOURCE NAME --replicas N", errUsage)
	}
	rc, cfg, err := conn.client()
	if err != nil {
		return err
	}
	sc := client.NewScaler(rc, discovery.NewCached(discovery.New(rc, discovery.Options{}), discovery.CacheOptions{}))
	s, err := sc.SetReplicas(ctx, pos[0], cfg.Namespace, pos[1], int32(*replicas), *rv)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s/%s scaled to %d\n", pos[0], s.Name, s.Spec.Replicas)
	return nil
}

func cutSlash(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}
