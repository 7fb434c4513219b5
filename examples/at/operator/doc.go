// Package operator is the At operator's controller: it watches At objects
// and the Pods they own, and moves each At through PENDING → RUNNING →
// DONE. The program in the folder above runs it; the e2e test and the demo
// run it in-process.
package operator
