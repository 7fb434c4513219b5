// Package operator is the Foo operator's controller, the Loom version of
// Kubernetes' sample-controller: it watches Foo objects and Deployments,
// creates each Foo's Deployment, keeps its replicas at the Foo's, and
// reports the available replicas and a Ready condition in the Foo's
// status. The program in the folder above runs it; the e2e test runs it
// in-process.
package operator
