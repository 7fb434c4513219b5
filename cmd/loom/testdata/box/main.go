// Command box is the program of the image loom exec, attach and
// port-forward are tested with: a few commands of a shell's toolbox, one
// binary called by the name it was run as (/bin/sh, /bin/echo, /bin/cat
// link to it), and an HTTP server when run as the image's entrypoint.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "manager" || name == "box" {
		if len(args) == 0 {
			args = []string{"serve", "8080"}
		}
		name, args = args[0], args[1:]
	}
	os.Exit(run(name, args))
}

func run(name string, args []string) int {
	switch name {
	case "serve":
		port := "8080"
		if len(args) > 0 {
			port = args[0]
		}
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from %s on port %s, path %s\n", host, port, r.URL.Path)
		})
		fmt.Println("serving on port", port)
		if err := http.ListenAndServe(":"+port, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "echo":
		fmt.Println(strings.Join(args, " "))
		return 0
	case "cat":
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, "cat:", err)
			return 1
		}
		return 0
	case "upper":
		// Upper-cases standard input line by line, until its end.
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println(strings.ToUpper(sc.Text()))
		}
		return 0
	case "true":
		return 0
	case "false":
		return 1
	case "sh":
		if len(args) != 2 || args[0] != "-c" {
			fmt.Fprintln(os.Stderr, "usage: sh -c 'COMMAND; COMMAND...'")
			return 2
		}
		return script(args[1])
	}
	fmt.Fprintf(os.Stderr, "sh: %s: not found\n", name)
	return 127
}

// script runs commands separated by ";", each split on spaces: a command
// of run, "exit N", or one whose output ends with ">&2" going to standard
// error. It returns the last command's code.
func script(s string) int {
	code := 0
	for _, cmd := range strings.Split(s, ";") {
		words := strings.Fields(cmd)
		if len(words) == 0 {
			continue
		}
		if words[0] == "exit" {
			n := code
			if len(words) > 1 {
				n, _ = strconv.Atoi(words[1])
			}
			return n
		}
		if last := len(words) - 1; words[last] == ">&2" {
			stdout := os.Stdout
			os.Stdout = os.Stderr
			code = run(words[0], words[1:last])
			os.Stdout = stdout
			continue
		}
		code = run(words[0], words[1:])
	}
	return code
}
