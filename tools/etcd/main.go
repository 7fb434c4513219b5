// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3.
//
// The etcd server module carries replace directives, so `go install` of it
// fails; this tiny main in our own module builds the same binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
