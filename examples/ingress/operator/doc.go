// Package operator is the Ingress manager's controller: a Service with the
// annotation ingress/http: "true" gets an Ingress of the same name, owned
// by the Service, that routes "/" to the Service's first port. The program
// in the folder above runs it; the e2e test runs it in-process.
package operator
