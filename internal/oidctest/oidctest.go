// Package oidctest is an OpenID Connect issuer for tests: a discovery
// document, a JWKS, and a token endpoint that exchanges refresh-tokens for
// new RS256-signed id-tokens. It stands in for the identity provider, a
// party outside the cluster, in tests of the oidc auth provider; a real
// kube-apiserver can verify its tokens (--oidc-issuer-url, --oidc-ca-file).
//
// Each refresh-token can be used once: a refresh returns a new one, as
// issuers that rotate refresh-tokens do. So a client that refreshes twice
// with the same refresh-token, or forgets to keep the new one, fails.
package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure an [Issuer]. The zero value is a public client "loom"
// whose refreshed id-tokens live ten minutes.
type Options struct {
	// ClientID is the only client the issuer knows. Empty means "loom".
	ClientID string
	// ClientSecret, when set, must be presented at the token endpoint.
	// Empty means a public client.
	ClientSecret string
	// AuthMethods is the discovery document's
	// token_endpoint_auth_methods_supported, and the methods the token
	// endpoint accepts for the client secret. Nil leaves it out of the
	// document and accepts both client_secret_basic and client_secret_post.
	AuthMethods []string
	// IDTokenLifetime is the lifetime of id-tokens issued by a refresh.
	// Zero means ten minutes.
	IDTokenLifetime time.Duration
}

// Issuer is a running test issuer. Its methods are safe for concurrent
// use.
type Issuer struct {
	// URL is the issuer URL, https://127.0.0.1:<port>.
	URL string
	// CAPEM is the PEM certificate that verifies the issuer's TLS
	// certificate.
	CAPEM []byte

	opts Options
	key  *rsa.PrivateKey
	srv  *httptest.Server

	mu         sync.Mutex
	subjects   map[string]string // unused refresh-token → subject
	calls      int
	lastID     string
	lastRT     string
	lastMethod string
}

// New starts an issuer, stopped when the test ends.
func New(t testing.TB, opts Options) *Issuer {
	t.Helper()
	if opts.ClientID == "" {
		opts.ClientID = "loom"
	}
	if opts.IDTokenLifetime == 0 {
		opts.IDTokenLifetime = 10 * time.Minute
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	i := &Issuer{opts: opts, key: key, subjects: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", i.discovery)
	mux.HandleFunc("GET /keys", i.keys)
	mux.HandleFunc("POST /token", i.token)
	i.srv = httptest.NewUnstartedServer(mux)
	i.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	i.srv.StartTLS()
	t.Cleanup(i.srv.Close)
	i.URL = i.srv.URL
	i.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.srv.Certificate().Raw})
	return i
}

// IDToken returns an id-token for subject, signed by the issuer, that
// expires at exp (which may be in the past).
func (i *Issuer) IDToken(subject string, exp time.Time) string {
	now := time.Now()
	claims := map[string]any{
		"iss": i.URL,
		"sub": subject,
		"aud": i.opts.ClientID,
		"iat": min(now.Unix(), exp.Unix()-1),
		"exp": exp.Unix(),
		"jti": randomString(), // two tokens minted in the same second differ
	}
	return i.sign(claims)
}

// RefreshToken returns a new refresh-token for subject, good for one
// refresh.
func (i *Issuer) RefreshToken(subject string) string {
	rt := "rt-" + randomString()
	i.mu.Lock()
	i.subjects[rt] = subject
	i.mu.Unlock()
	return rt
}

// Refreshes returns how many requests the token endpoint has received,
// failed ones included.
func (i *Issuer) Refreshes() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.calls
}

// Last returns the id-token and refresh-token of the last successful
// refresh, and how the client presented its secret there
// ("client_secret_basic", "client_secret_post" or "none").
func (i *Issuer) Last() (idToken, refreshToken, method string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.lastID, i.lastRT, i.lastMethod
}

func (i *Issuer) discovery(w http.ResponseWriter, r *http.Request) {
	doc := map[string]any{
		"issuer":                                i.URL,
		"jwks_uri":                              i.URL + "/keys",
		"token_endpoint":                        i.URL + "/token",
		"authorization_endpoint":                i.URL + "/auth",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	}
	if i.opts.AuthMethods != nil {
		doc["token_endpoint_auth_methods_supported"] = i.opts.AuthMethods
	}
	writeJSON(w, http.StatusOK, doc)
}

func (i *Issuer) keys(w http.ResponseWriter, r *http.Request) {
	pub := i.key.PublicKey
	writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "k1",
		"n": b64(pub.N.Bytes()),
		"e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	i.mu.Lock()
	i.calls++
	i.mu.Unlock()
	oauthError := func(code int, name, desc string) {
		writeJSON(w, code, map[string]string{"error": name, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		oauthError(http.StatusBadRequest, "invalid_request", "not a form")
		return
	}
	id, secret, method := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), "none"
	if u, p, ok := r.BasicAuth(); ok {
		id, _ = url.QueryUnescape(u)
		secret, _ = url.QueryUnescape(p)
		method = "client_secret_basic"
	} else if secret != "" {
		method = "client_secret_post"
	}
	allowed := i.opts.AuthMethods == nil || method == "none" || slices.Contains(i.opts.AuthMethods, method)
	if id != i.opts.ClientID || secret != i.opts.ClientSecret || !allowed {
		oauthError(http.StatusUnauthorized, "invalid_client", "unknown client, wrong secret or method "+method)
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "refresh_token" {
		oauthError(http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant type %q", g))
		return
	}
	rt := r.PostForm.Get("refresh_token")
	i.mu.Lock()
	subject, ok := i.subjects[rt]
	delete(i.subjects, rt)
	i.mu.Unlock()
	if !ok {
		oauthError(http.StatusBadRequest, "invalid_grant", "the refresh token is unknown or was used already")
		return
	}
	idToken := i.IDToken(subject, time.Now().Add(i.opts.IDTokenLifetime))
	newRT := i.RefreshToken(subject)
	i.mu.Lock()
	i.lastID, i.lastRT, i.lastMethod = idToken, newRT, method
	i.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":  "at-" + randomString(),
		"token_type":    "Bearer",
		"expires_in":    int(i.opts.IDTokenLifetime.Seconds()),
		"id_token":      idToken,
		"refresh_token": newRT,
	})
}

// sign makes a compact JWS (RS256) of claims.
func (i *Issuer) sign(claims map[string]any) string {
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"})
	payload, _ := json.Marshal(claims)
	input := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, i.key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err) // cannot happen with a valid key
	}
	return input + "." + b64(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func randomString() string {
	b := make([]byte, 12)
	rand.Read(b)
	return strings.TrimRight(base64.RawURLEncoding.EncodeToString(b), "=")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
