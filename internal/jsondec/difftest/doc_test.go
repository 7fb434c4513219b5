// Package difftest holds the differential tests of jsondec against
// apimachinery's util/json over every kind of 20 API groups. They live in
// their own package so that the fuzz targets of jsondec do not link (and
// instrument) all of k8s.io/api, which makes fuzzing crawl.
package difftest
