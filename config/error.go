package config

import (
	"errors"
	"fmt"
)

// ErrNoConfig is returned (wrapped) by [Load] and [LoadKubeconfig] when no
// kubeconfig file was found and no server was given in the overrides.
var ErrNoConfig = errors.New("no kubeconfig found")

// ErrNotInCluster is returned (wrapped) by [InCluster] when the
// KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT variable is unset.
var ErrNotInCluster = errors.New("not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")

// Error describes a problem with one field of one configuration file.
//
// File is the file that holds the bad value (a kubeconfig, or a service
// account file for in-cluster configuration); it is empty when the value came
// from an override or flag. Field names the field in kubeconfig notation, for
// example `users["alice"].client-key` or `current-context`. Err is the
// underlying cause and is returned by Unwrap.
//
// Error never includes the value of a secret field.
type Error struct {
	File  string
	Field string
	Err   error
}

// Error implements the error interface.
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Field != "":
		return fmt.Sprintf("config: %s: %s: %v", e.File, e.Field, e.Err)
	case e.File != "":
		return fmt.Sprintf("config: %s: %v", e.File, e.Err)
	case e.Field != "":
		return fmt.Sprintf("config: %s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("config: %v", e.Err)
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

func fieldErr(file, field string, err error) error {
	return &Error{File: file, Field: field, Err: err}
}

func fieldErrf(file, field, format string, args ...any) error {
	return &Error{File: file, Field: field, Err: fmt.Errorf(format, args...)}
}
