// Package webhook serves Kubernetes webhooks: dynamic admission (validating
// and mutating, admission.k8s.io/v1 AdmissionReview) and CRD conversion
// (apiextensions.k8s.io/v1 ConversionReview), over HTTPS, with certificates
// it can make, rotate and inject itself, so no cert-manager is needed.
//
// # Server
//
// Server is an HTTPS server (TLS 1.2 or later) that reads its serving pair
// from tls.crt and tls.key in a folder and reloads them when they change,
// keeping the old pair until the new files form a valid pair. It serves
// /healthz, and counts requests, errors and latency per webhook through a
// Metrics (the manager's Prometheus registry implements it). Start blocks
// until its context ends, then shuts down gracefully. Add it to a manager:
// it runs on every replica, not only the leader, because the API server
// may call any of them.
//
// # Admission
//
// Admission turns an AdmissionFunc into an HTTP handler: the review is
// decoded (a malformed one gets a 400 with the reason, never a panic), the
// function answers with Allowed or Denied, and the answer is encoded.
// ValidatorFor serves a Validator, the common shape of one type's
// validation (on create, update and delete), with the object decoded into
// its Go type. Mutating serves a function that changes a typed object in
// place, and answers with the JSON patch from the object as sent to the
// object as changed; DefaulterFor serves a Defaulter through it. Return
// Warnings with the answer; deny with an error: an apimachinery status
// error (such as apierrors.NewInvalid) keeps its code and reason, any
// other error denies with 403 Forbidden and its message, which kubectl
// shows.
//
// # Conversion
//
// Conversion answers ConversionReviews for the kinds of a Scheme by hub and
// spoke: one version of a kind is the hub (its type implements Hub), every
// other version converts to and from the hub (its type implements
// Convertible). A conversion between two spokes goes through the hub, so n
// versions need n-1 pairs of functions, not n².
//
// # Certificates
//
// Certs makes a CA and a serving certificate for the webhook's DNS names and
// IPs (or loads given ones), writes them where the Server reads them, and
// renews them before they expire; Injector writes the CA bundle into
// ValidatingWebhookConfigurations, MutatingWebhookConfigurations and CRD
// conversion stanzas, and can point them at a URL (for a webhook the API
// server reaches on 127.0.0.1, as in tests).
//
// Several replicas share one CA through SharedCA: it keeps the CA in a
// Secret, every replica signs its serving certificate with it (Certs made
// with CertOptions.CA, kept current by Certs.SetCA), and only the leader
// publishes the bundle and rotates the CA, so a call that reaches any
// replica verifies against the one caBundle. manager.Manager.Webhooks wires
// all of this in one call.
package webhook
