// Package config turns kubeconfig files, in-cluster service-account files and
// command-line flags into one resolved [Config] value: where the API server
// is, how to verify it, and how to authenticate to it.
//
// The package never opens a network connection and never imports the rest
// layer: it reads files and environment variables, and writes a kubeconfig
// only when asked to ([UpdateAuthProviderConfig]). Package rest builds
// transports and clients from a [Config].
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
// # Authentication
//
// A user entry may hold client certificates, a token or token file, basic
// auth, impersonation, an exec credential plugin ([ExecConfig]) or the oidc
// auth provider ([OIDC]). [Kubeconfig.Resolve] checks them the way kubectl
// does, and more strictly where kubectl would silently carry on (a context
// that names a missing user or cluster, a client key without a
// certificate, a token alongside an exec plugin). Other auth providers are
// refused with an [*UnsupportedAuthProviderError]; for gcp and azure it
// names the exec plugin that replaced them. The file docs/kubeconfig.md in
// the repository compares every kubeconfig field with kubectl.
//
// Files named in a kubeconfig or by [InCluster] stay file names in the
// [Config]: package rest reads them, and reads the token file, the CA and
// the client certificate and key again when they are rotated.
//
// Package rest runs exec plugins (with the user's terminal when it is
// offered one and the plugin's interactiveMode allows) and refreshes OIDC
// id-tokens, writing the new tokens back to the file the user came from
// with [UpdateAuthProviderConfig].
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
// [Config], [TLS], [Auth], [ExecConfig], [OIDC], [User] and [AuthProvider]
// redact bearer tokens, passwords, key material, exec environment values
// and OIDC tokens and client secrets when formatted with fmt or logged with
// log/slog, so a Config can be printed while debugging.
package config
