// Package difftest holds the differential tests of protodec against the
// generated Unmarshal methods, on random objects of every kind of 20 API
// groups. They live in their own package so that protodec's fuzz target
// does not link (and instrument) all of k8s.io/api, which makes fuzzing
// crawl.
package difftest
