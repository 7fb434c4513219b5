package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/shard"
)

func init() {
	commands["shards"] = command{"show the shards of a sharded controller's ring and the objects each holds", runShards}
}

// runShards prints a ring's shards, from their Leases, with the number of
// buckets each claims, and how many objects of each given resource each
// shard holds: those whose bucket label names a bucket the ring of the
// live shards gives it.
func runShards(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom shards", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	leaseNS := fs.String("lease-namespace", "", "the namespace of the ring's Leases (default: the namespace of -n or the kubeconfig)")
	all := fs.Bool("A", false, "count objects in all namespaces")
	fs.BoolVar(all, "all-namespaces", false, "count objects in all namespaces")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return fmt.Errorf("%w: usage: loom shards RING [RESOURCE...] [--lease-namespace NS] [-n NS | -A]", errUsage)
	}
	ring := pos[0]
	rc, cfg, err := conn.client()
	if err != nil {
		return err
	}
	defer rc.CloseIdleConnections()
	leases, err := client.For[coordinationv1.Lease](rc, client.Options{})
	if err != nil {
		return err
	}
	lns := *leaseNS
	if lns == "" {
		lns = cfg.Namespace
	}
	ll, err := leases.Namespace(lns).List(ctx, metav1.ListOptions{LabelSelector: shard.RingLabel + "=" + ring})
	if err != nil {
		return fmt.Errorf("list the Leases of ring %q in %s: %w", ring, lns, err)
	}
	type row struct {
		shard, live, renewed, buckets string
		counts                        []int
	}
	var rows []*row
	byShard := map[string]*row{}
	now := time.Now()
	for _, l := range ll.Items {
		if l.Spec.HolderIdentity == nil {
			continue
		}
		r := &row{shard: *l.Spec.HolderIdentity, live: "no", renewed: "never", buckets: "?"}
		if claims, err := shard.DecodeClaims(l.Annotations[shard.ClaimsAnnotation]); err == nil {
			n := 0
			for _, c := range claims {
				if c {
					n++
				}
			}
			r.buckets = strconv.Itoa(n)
		}
		if rt := l.Spec.RenewTime; rt != nil {
			age := now.Sub(rt.Time)
			r.renewed = age.Round(time.Second).String() + " ago"
			if d := l.Spec.LeaseDurationSeconds; d != nil && age < time.Duration(*d)*time.Second {
				r.live = "yes"
			}
		}
		rows = append(rows, r)
		byShard[r.shard] = r
	}
	slices.SortFunc(rows, func(a, b *row) int { return strings.Compare(a.shard, b.shard) })

	mapper := discovery.NewMapper(discovery.NewCached(discovery.New(rc, discovery.Options{}), discovery.CacheOptions{}), discovery.MapperOptions{})
	// An object's shard is the one the ring of the live shards gives its
	// bucket.
	bucket := shard.BucketLabel(ring)
	var liveShards []string
	for _, r := range rows {
		if r.live == "yes" {
			liveShards = append(liveShards, r.shard)
		}
	}
	live := shard.NewRing(liveShards, shard.RingOptions{})
	var heads []string
	var other, unassigned []int
	for i, name := range pos[1:] {
		mp, err := mapper.ResourceFor(ctx, name)
		if err != nil {
			return fmt.Errorf("the server doesn't have a resource type %q: %w", name, err)
		}
		heads = append(heads, strings.ToUpper(name))
		c, err := client.For[metav1.PartialObjectMetadata](rc, client.Options{Resource: mp})
		if err != nil {
			return err
		}
		if mp.Namespaced && !*all {
			c = c.Namespace(cfg.Namespace)
		}
		for _, r := range rows {
			r.counts = append(r.counts, 0)
		}
		other, unassigned = append(other, 0), append(unassigned, 0)
		err = c.Pages(ctx, metav1.ListOptions{}, func() {
			for _, r := range rows {
				r.counts[i] = 0
			}
			other[i], unassigned[i] = 0, 0
		}, func(page *client.List[*metav1.PartialObjectMetadata]) error {
			for _, o := range page.Items {
				s, ok := "", false
				if b, err := strconv.Atoi(o.Labels[bucket]); err == nil {
					s, ok = live.Owner(b)
				}
				switch r := byShard[s]; {
				case !ok:
					unassigned[i]++
				case r != nil:
					r.counts[i]++
				default:
					other[i]++
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", name, err)
		}
	}
	if len(rows) == 0 {
		fmt.Fprintf(errOut, "No Leases of ring %q in namespace %s.\n", ring, lns)
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(append([]string{"SHARD", "LIVE", "RENEWED", "BUCKETS"}, heads...), "\t"))
	line := func(cells []string, counts []int) {
		for _, n := range counts {
			cells = append(cells, fmt.Sprint(n))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for _, r := range rows {
		line([]string{r.shard, r.live, r.renewed, r.buckets}, r.counts)
	}
	if len(heads) > 0 {
		line([]string{"<unassigned>", "", "", ""}, unassigned)
		if slices.ContainsFunc(other, func(n int) bool { return n > 0 }) {
			line([]string{"<no lease>", "", "", ""}, other)
		}
	}
	return tw.Flush()
}
