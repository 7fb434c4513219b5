package client

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultPageSize is the page size of ListAll and Pages when the options
// set no Limit.
const DefaultPageSize = 500

// Pages lists in pages of opts.Limit objects (DefaultPageSize when 0),
// calling fn for each page in order, following the continue tokens.
//
// If a continue token expires midway (410 Gone: the snapshot the pages came
// from was compacted), Pages starts again with one unpaginated list, as
// consistent as a fresh read, and calls restart first so the caller can
// drop what it gathered. restart may be nil when fn only counts. An error
// from fn stops the walk and is returned.
func (c *Client[T]) Pages(ctx context.Context, opts metav1.ListOptions, restart func(), fn func(*List[T]) error) error {
	if opts.Limit == 0 {
		opts.Limit = DefaultPageSize
	}
	first := true
	for {
		page, err := c.List(ctx, opts)
		if err != nil {
			if !first && apierrors.IsResourceExpired(err) {
				if restart != nil {
					restart()
				}
				full := opts
				full.Limit, full.Continue = 0, ""
				page, err := c.List(ctx, full)
				if err != nil {
					return fmt.Errorf("client: list after the continue token expired: %w", err)
				}
				return fn(page)
			}
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		if page.Continue == "" {
			return nil
		}
		first = false
		opts.Continue = page.Continue
		// A continue token carries the snapshot's resourceVersion itself.
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
}

// ListAll lists every object in pages (see Pages) and returns them in one
// List, with the resourceVersion of the snapshot they came from.
func (c *Client[T]) ListAll(ctx context.Context, opts metav1.ListOptions) (*List[T], error) {
	all := &List[T]{newItem: c.newObj}
	err := c.Pages(ctx, opts, func() { all.Items = all.Items[:0] }, func(page *List[T]) error {
		all.TypeMeta = page.TypeMeta
		all.ResourceVersion = page.ResourceVersion
		all.Items = append(all.Items, page.Items...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}
