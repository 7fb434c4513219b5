// Command hello is the program of the real-node tests' image: an HTTP
// server on :8080 that logs a line at start and one per request, and
// answers with its Pod's name (POD_NAME, or else HOSTNAME).
package main

import (
	"cmp"
	"fmt"
	"net/http"
	"os"
)

func main() {
	fmt.Println("hello: listening on :8080")
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("hello: served", r.URL.Path)
		fmt.Fprintf(w, "hello from %s\n", cmp.Or(os.Getenv("POD_NAME"), os.Getenv("HOSTNAME")))
	})
	if err := http.ListenAndServe(":8080", nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
