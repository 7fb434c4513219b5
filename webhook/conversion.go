package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Hub is implemented by the type of the one version of a kind that all
// others convert through. The method only marks the type.
type Hub interface {
	runtime.Object
	Hub()
}

// Convertible is implemented by the type of every version of a kind other
// than the hub: ConvertTo fills hub (an empty object of the hub's type)
// from the receiver, and ConvertFrom fills the receiver from hub. Fields
// one version has and the other lacks must survive a round trip, usually
// in an annotation, for conversion to be lossless as the API server
// requires.
type Convertible interface {
	runtime.Object
	ConvertTo(hub Hub) error
	ConvertFrom(hub Hub) error
}

// conversionReview is apiextensions.k8s.io/v1 ConversionReview, whose Go
// types live in k8s.io/apiextensions-apiserver; the fields used are few.
type conversionReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *conversionRequest  `json:"request,omitempty"`
	Response        *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               string                 `json:"uid"`
	DesiredAPIVersion string                 `json:"desiredAPIVersion"`
	Objects           []runtime.RawExtension `json:"objects"`
}

type conversionResponse struct {
	UID              string                 `json:"uid"`
	ConvertedObjects []runtime.RawExtension `json:"convertedObjects"`
	Result           metav1.Status          `json:"result"`
}

// Conversion serves ConversionReviews (apiextensions.k8s.io/v1) for the
// kinds registered in scheme, by hub and spoke (see Hub and Convertible).
// An object already in the desired version is returned as sent. A request
// for a kind or version the scheme lacks, or a conversion that fails, is
// answered with a failure naming the object, which the API server passes on
// to its client; a malformed review gets 400 Bad Request.
func Conversion(scheme *runtime.Scheme) http.Handler {
	c := &converter{scheme: scheme}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review, status, err := readConversionReview(r)
		if err != nil {
			http.Error(w, "webhook: "+err.Error(), status)
			return
		}
		resp := &conversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		out, err := c.convertAll(r.Context(), review.Request)
		if err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Message: err.Error()}
			if errors.Is(err, errInternal) {
				resp.Result.Code = http.StatusInternalServerError
			}
		} else {
			resp.ConvertedObjects = out
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&conversionReview{TypeMeta: review.TypeMeta, Response: resp})
	})
}

var errInternal = errors.New("internal error")

func readConversionReview(r *http.Request) (*conversionReview, int, error) {
	body, status, err := readBody(r)
	if err != nil {
		return nil, status, err
	}
	var review conversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("the body is not a ConversionReview: %w", err)
	}
	if review.APIVersion != "apiextensions.k8s.io/v1" || review.Kind != "ConversionReview" {
		return nil, http.StatusBadRequest, fmt.Errorf("got apiVersion %q kind %q, want apiextensions.k8s.io/v1 ConversionReview", review.APIVersion, review.Kind)
	}
	if review.Request == nil || review.Request.UID == "" {
		return nil, http.StatusBadRequest, errors.New("the ConversionReview has no request, or no uid")
	}
	if _, err := schema.ParseGroupVersion(review.Request.DesiredAPIVersion); err != nil || review.Request.DesiredAPIVersion == "" {
		return nil, http.StatusBadRequest, fmt.Errorf("desiredAPIVersion %q is not a group/version", review.Request.DesiredAPIVersion)
	}
	return &review, 0, nil
}

type converter struct {
	scheme *runtime.Scheme
}

func (c *converter) convertAll(ctx context.Context, req *conversionRequest) (out []runtime.RawExtension, err error) {
	defer func() {
		if p := recover(); p != nil {
			notePanic(ctx, true)
			out, err = nil, fmt.Errorf("%w: conversion panicked: %v", errInternal, p)
		}
	}()
	to, _ := schema.ParseGroupVersion(req.DesiredAPIVersion)
	out = make([]runtime.RawExtension, len(req.Objects))
	for i, raw := range req.Objects {
		conv, err := c.convert(raw.Raw, to)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		out[i] = runtime.RawExtension{Raw: conv}
	}
	return out, nil
}

func (c *converter) convert(raw []byte, to schema.GroupVersion) ([]byte, error) {
	var tm metav1.TypeMeta
	var meta struct {
		Metadata struct{ Namespace, Name string } `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	_ = json.Unmarshal(raw, &meta)
	from := tm.GroupVersionKind()
	name := fmt.Sprintf("%s %s/%s", from.Kind, meta.Metadata.Namespace, meta.Metadata.Name)
	if from.Kind == "" || from.Version == "" {
		return nil, errors.New("object has no apiVersion or kind")
	}
	if from.GroupVersion() == to {
		return raw, nil
	}
	if from.Group != to.Group {
		return nil, fmt.Errorf("%s: cannot convert from group %q to %q", name, from.Group, to.Group)
	}
	src, err := c.scheme.New(from)
	if err != nil {
		return nil, fmt.Errorf("%s: %s is not registered for conversion: %w", name, from, err)
	}
	dstGVK := to.WithKind(from.Kind)
	dst, err := c.scheme.New(dstGVK)
	if err != nil {
		return nil, fmt.Errorf("%s: %s is not registered for conversion: %w", name, dstGVK, err)
	}
	if err := json.Unmarshal(raw, src); err != nil {
		return nil, fmt.Errorf("%s: decoding %s: %w", name, from, err)
	}
	if err := c.viaHub(src, dst, from); err != nil {
		return nil, fmt.Errorf("%s: converting %s to %s: %w", name, from.GroupVersion(), to, err)
	}
	dst.GetObjectKind().SetGroupVersionKind(dstGVK)
	return json.Marshal(dst)
}

// viaHub converts src into dst: directly when one of them is the hub,
// through a fresh hub object otherwise.
func (c *converter) viaHub(src, dst runtime.Object, from schema.GroupVersionKind) error {
	srcHub, srcIsHub := src.(Hub)
	dstHub, dstIsHub := dst.(Hub)
	srcConv, srcOK := src.(Convertible)
	dstConv, dstOK := dst.(Convertible)
	switch {
	case srcIsHub && dstOK:
		return dstConv.ConvertFrom(srcHub)
	case dstIsHub && srcOK:
		return srcConv.ConvertTo(dstHub)
	case srcOK && dstOK:
		hub, err := c.hubFor(from.GroupKind())
		if err != nil {
			return err
		}
		if err := srcConv.ConvertTo(hub); err != nil {
			return err
		}
		return dstConv.ConvertFrom(hub)
	default:
		return fmt.Errorf("%w: %T and %T are neither a Hub nor Convertible to one", errInternal, src, dst)
	}
}

// hubFor finds the registered version of gk whose type is a Hub.
func (c *converter) hubFor(gk schema.GroupKind) (Hub, error) {
	var found []schema.GroupVersionKind
	for gvk, t := range c.scheme.AllKnownTypes() {
		if gvk.GroupKind() == gk && reflect.PointerTo(t).Implements(reflect.TypeFor[Hub]()) {
			found = append(found, gvk)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%w: %d hub versions of %s registered, want exactly 1: %v", errInternal, len(found), gk, found)
	}
	obj, err := c.scheme.New(found[0])
	if err != nil {
		return nil, err
	}
	return obj.(Hub), nil
}
