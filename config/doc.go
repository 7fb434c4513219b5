// Package config turns kubeconfig files, in-cluster service-account files and
// command-line flags into one resolved [Config] value: where the API server
// is, how to verify it, and how to authenticate to it.
//
// The package is pure: it reads files and environment variables, but it never
// opens a network connection and never imports the rest layer. Package rest
// builds transports and clients from a [Config].
//
// # Getting started
//
// Most programs call [Load], which finds a kubeconfig the way kubectl does,
// or register [Flags] on a flag set and call [Flags.Load], which also falls
// back to the in-cluster configuration:
//
//	cfg, err := config.Load(config.LoadOptions{})
//	if err != nil {
//		return err
//	}
//	// cfg.Host, cfg.TLS, cfg.Auth ...
//
// # Finding the kubeconfig
//
// [LoadKubeconfig] uses, in order: the explicit path in [LoadOptions.Path]
// (which must exist); otherwise every file in the KUBECONFIG list (files
// that do not exist are skipped); otherwise ~/.kube/config. Files in the
// KUBECONFIG list are merged with kubectl's precedence rules: the first file
// to define a cluster, user or context name wins that name (entries are not
// merged field by field), and the first file to set current-context wins.
// [Overrides] are applied last.
//
// Relative paths inside a kubeconfig (certificate-authority,
// client-certificate, client-key, tokenFile, and an exec command that contains
// a path separator) are resolved against the directory of the file that
// contains them, so merging files from different directories is safe.
//
// # Errors
//
// Problems with a file are reported as a [*Error] that names the file and the
// field, for example
//
//	config: /home/me/.kube/config: users["alice"].client-certificate: open ...: no such file or directory
//
// Use errors.As to get at the parts, and errors.Is with [ErrNoConfig],
// [ErrNotInCluster] and the fs errors to classify them. The parser never
// panics on malformed input; a fuzz test checks this.
//
// # Secrets
//
// [Config], [TLS], [Auth] and [ExecConfig] redact bearer tokens, passwords,
// key material and exec environment values when formatted with fmt or logged
// with log/slog, so a Config can be printed while debugging.
package config
