package webhook

import (
	"errors"
	"net"
	"slices"
	"time"

	"github.com/loom-k8s/loom/internal/pki"
)

// The rotation plan: what Certs must do next, decided from a summary of
// its certificates (certState) and options (certPolicy). planCerts and
// nextDue do no I/O, read no clock and generate no key, so tests can walk
// them through whole rotations in scripts (testdata/plan/*.txt). Certs
// carries a plan out (carryOut) and publishes the bundle.

// caState is a CA of the bundle as the plan sees it.
type caState struct {
	NotBefore, NotAfter time.Time
	// Key is whether Certs holds the CA's private key and can sign with it.
	Key bool
	// TrustedAt is when the OnRotate hooks first succeeded with a bundle
	// holding this CA; zero while not known.
	TrustedAt time.Time
}

// leafState is the serving certificate as the plan sees it.
type leafState struct {
	NotBefore, NotAfter time.Time
	DNSNames            []string
	IPs                 []net.IP
	// Issuer is the index in certState.CAs of the CA that signed it; -1
	// when none of them did.
	Issuer int
	// Since is when it was written or loaded: servers may have been
	// serving it since then.
	Since time.Time
}

// certState is what the plan decides from.
type certState struct {
	Now time.Time
	// CAs are the CAs of the bundle, newest first: the given ones, or the
	// generated ones as loaded from Dir (expired ones included).
	CAs []caState
	// Leaf is the serving certificate; nil when Dir holds no usable pair.
	Leaf *leafState
	// Force asks for a new serving certificate now (Rotate).
	Force bool
	// BundleStale is whether CAs differ from the bundle in use (what
	// CABundle returns): they were loaded anew, or a step that changed
	// them failed before it could set the bundle.
	BundleStale bool
	// Unpublished is whether the hooks have yet to succeed with the
	// bundle in use.
	Unpublished bool
	// RetryAt is when failed hooks or writes may be retried; zero when
	// none failed.
	RetryAt time.Time
}

// certPolicy is what the plan needs of CertOptions, defaults applied.
type certPolicy struct {
	// DNSNames and IPs are what the serving certificate must name.
	DNSNames []string
	IPs      []net.IP
	// Lifetimes and delays, as in CertOptions.
	CAValidity, CertValidity, RotateBefore, PropagationDelay time.Duration
	// CARenew: a generated CA is renewed when no more than this is left
	// of it (CertValidity + RotateBefore).
	CARenew time.Duration
	// GivenCA: the CAs were given; the plan never generates or drops one.
	GivenCA bool
	// GivenServing: the serving pair was given; the plan renews nothing
	// and only publishes the bundle.
	GivenServing bool
}

// caRef names a CA in a plan: an index into certState.CAs, or newCA.
type caRef int

// newCA is the CA that certPlan.NewCA asks for.
const newCA caRef = -1

// renewal asks for a new serving certificate.
type renewal struct {
	// Reason says why, for the log.
	Reason string
	// Signer is the CA that signs it.
	Signer caRef
	// CutShort is whether the signer expires before CertValidity has
	// passed, so that the certificate expires with it.
	CutShort bool
}

// certPlan is what one step must do, in this order: drop the Expired CAs,
// generate a CA if NewCA says so, issue the serving certificate if Renew
// says so, drop the Retired CAs, set the bundle if BundleChanged, and then
// publish it if Publish says so.
type certPlan struct {
	// Err is set when nothing can be done (the given CA expired): the
	// step fails and is retried with backoff. The other fields are then
	// empty.
	Err error
	// Expired are the CAs (indexes into certState.CAs) that have expired:
	// they verify nothing and leave the bundle.
	Expired []int
	// NewCA says why a CA must be generated, valid from now for
	// CAValidity; it joins the bundle as its newest CA. Empty when none.
	NewCA string
	// Renew asks for a serving certificate; nil when none is due.
	Renew *renewal
	// Retired are the CAs older than the one in service that leave the
	// bundle: PropagationDelay has passed since the serving certificate
	// switched away from them.
	Retired []int
	// BundleChanged is whether the bundle in use must be set to the CAs
	// as the plan leaves them. A changed bundle is unpublished, and a
	// pending retry is cancelled: it is published at once.
	BundleChanged bool
	// Publish is whether the hooks must be called with the bundle.
	Publish bool
	// Next is when the next thing falls due if nothing else happens, and
	// NextWhy what it is (see nextDue). Zero when nothing will, and with
	// Err.
	Next    time.Time
	NextWhy string
}

// planCerts decides what a step of Certs must do at s.Now.
//
// A generated CA is renewed when CARenew is left of it, when the newest has
// no key, or when there is none; expired ones leave the bundle. The
// serving certificate is renewed when it is missing, not signed by a CA of
// the bundle, for other names, or expired (by the trusted signer if there
// is one, else by the newest CA: nothing works anyway); when a new CA has
// become trusted (switch); when Force asks; or when RotateBefore is left of
// it and a renewal by the trusted signer would outlast it. A CA is trusted
// once the hooks published it PropagationDelay ago, or when it signed the
// serving certificate in service; a given CA always is. CAs older than the
// one in service are retired PropagationDelay after the switch.
func planCerts(s certState, p certPolicy) certPlan {
	now := s.Now
	var pl certPlan
	// The CAs as the plan changes them, with what each refers to.
	cas := slices.Clone(s.CAs)
	refs := make([]caRef, len(cas))
	for i := range refs {
		refs[i] = caRef(i)
	}
	leaf := s.Leaf
	if leaf != nil {
		l := *leaf
		leaf = &l
	}

	if !p.GivenServing {
		if p.GivenCA {
			if len(cas) == 0 || !now.Before(cas[0].NotAfter) {
				return certPlan{Err: &CertError{Source: "CertOptions.CA.Cert", Err: ErrCertExpired}}
			}
		} else {
			for i := len(cas) - 1; i >= 0; i-- {
				if !now.Before(cas[i].NotAfter) {
					pl.Expired = append(pl.Expired, int(refs[i]))
					cas, refs = slices.Delete(cas, i, i+1), slices.Delete(refs, i, i+1)
					if leaf != nil {
						switch {
						case leaf.Issuer == i:
							leaf.Issuer = -1
						case leaf.Issuer > i:
							leaf.Issuer--
						}
					}
				}
			}
			slices.Reverse(pl.Expired)
			switch {
			case len(cas) == 0:
				pl.NewCA = "no CA"
			case !cas[0].Key:
				pl.NewCA = "no key for the newest CA"
			case cas[0].NotAfter.Sub(now) <= p.CARenew:
				pl.NewCA = "CA due for renewal"
			}
			if pl.NewCA != "" {
				cas = slices.Insert(cas, 0, caState{
					NotBefore: certTime(now.Add(-pki.Backdate)),
					NotAfter:  certTime(now.Add(p.CAValidity)),
					Key:       true,
				})
				refs = slices.Insert(refs, 0, newCA)
				if leaf != nil && leaf.Issuer >= 0 {
					leaf.Issuer++
				}
			}
		}

		issuer := -1
		if leaf != nil {
			issuer = leaf.Issuer
		}
		trusted := trustedSigner(cas, issuer, p, now)
		signer := trusted
		reason := ""
		switch {
		case leaf == nil:
			reason = "no serving certificate"
		case issuer < 0:
			reason = "serving certificate not signed by a CA of the bundle"
		case !sameSANs(leaf.DNSNames, leaf.IPs, p.DNSNames, p.IPs):
			reason = "serving certificate for other DNS names or IPs"
		case now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter):
			reason = "serving certificate expired"
		}
		if reason != "" {
			// Nothing works now: sign with the best CA there is.
			if signer < 0 {
				signer = newestSigner(cas)
			}
		} else {
			switch {
			case trusted >= 0 && trusted != issuer:
				reason = "switch to the new CA"
			case s.Force:
				reason = "rotation asked for"
				if trusted < 0 {
					signer = newestSigner(cas)
				}
			case trusted >= 0 && leafDue(leaf, cas[trusted], p, now):
				reason = "serving certificate due for renewal"
			}
		}
		if reason != "" {
			if signer < 0 {
				return certPlan{Err: &CertError{Source: "CertOptions.CA", Err: errors.New("no CA key to sign with")}}
			}
			notAfter := now.Add(p.CertValidity)
			cut := cas[signer].NotAfter.Before(notAfter)
			if cut {
				notAfter = cas[signer].NotAfter
			}
			pl.Renew = &renewal{Reason: reason, Signer: refs[signer], CutShort: cut}
			leaf = &leafState{
				NotBefore: certTime(now.Add(-pki.Backdate)),
				NotAfter:  certTime(notAfter),
				DNSNames:  p.DNSNames,
				IPs:       p.IPs,
				Issuer:    signer,
				Since:     now,
			}
		}

		// CAs older than the one in service leave the bundle once every
		// server has had time to load the serving certificate.
		if !p.GivenCA && leaf != nil && leaf.Issuer >= 0 && leaf.Issuer < len(cas)-1 &&
			!now.Before(leaf.Since.Add(p.PropagationDelay)) {
			for _, r := range refs[leaf.Issuer+1:] {
				pl.Retired = append(pl.Retired, int(r))
			}
			cas, refs = cas[:leaf.Issuer+1], refs[:leaf.Issuer+1]
		}
	}

	pl.BundleChanged = s.BundleStale || len(pl.Expired) > 0 || pl.NewCA != "" || len(pl.Retired) > 0
	after := certState{Now: now, CAs: cas, Leaf: leaf, Unpublished: s.Unpublished, RetryAt: s.RetryAt}
	if pl.BundleChanged {
		after.Unpublished, after.RetryAt = true, time.Time{}
	}
	pl.Publish = publishDue(after.Unpublished, after.RetryAt, now)
	pl.Next, pl.NextWhy = nextDue(after, p)
	return pl
}

// nextDue returns when a plan of s would next have something to do if
// nothing else happened, and what: a retry, a serving certificate or CA
// to renew, a switch to a new CA, an old CA to retire, or a certificate
// that expires. Zero when nothing will fall due (a given serving pair,
// published). s.Force is ignored.
func nextDue(s certState, p certPolicy) (next time.Time, why string) {
	now := s.Now
	at := func(t time.Time, w string) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next, why = t, w
		}
	}
	if s.Unpublished && !s.RetryAt.IsZero() {
		at(s.RetryAt, "retry")
	}
	if p.GivenServing {
		return next, why
	}
	issuer := -1
	if l := s.Leaf; l != nil {
		issuer = l.Issuer
		at(l.NotAfter, "serving certificate expires")
		if t := trustedSigner(s.CAs, issuer, p, now); t >= 0 && s.CAs[t].NotAfter.After(l.NotAfter) {
			at(l.NotAfter.Add(-p.RotateBefore), "serving certificate due for renewal")
		}
	}
	for i, ca := range s.CAs {
		at(ca.NotAfter, "CA expires")
		if i == 0 && !p.GivenCA {
			at(ca.NotAfter.Add(-p.CARenew), "CA due for renewal")
		}
		if i != issuer && !ca.TrustedAt.IsZero() && ca.Key {
			at(ca.TrustedAt.Add(p.PropagationDelay), "CA trusted, switch")
		}
	}
	if !p.GivenCA && issuer >= 0 && issuer < len(s.CAs)-1 {
		at(s.Leaf.Since.Add(p.PropagationDelay), "old CA leaves the bundle")
	}
	return next, why
}

// trustedSigner returns the index of the newest CA with a key that clients
// are known to trust: the one that signed the serving certificate in
// service (issuer), one the hooks published at least PropagationDelay
// ago, or any given one. -1 if none.
func trustedSigner(cas []caState, issuer int, p certPolicy, now time.Time) int {
	for i, ca := range cas {
		if !ca.Key {
			continue
		}
		if i == issuer || p.GivenCA {
			return i
		}
		if !ca.TrustedAt.IsZero() && !now.Before(ca.TrustedAt.Add(p.PropagationDelay)) {
			return i
		}
	}
	return -1
}

// newestSigner returns the index of the newest CA with a key, or -1.
func newestSigner(cas []caState) int {
	return slices.IndexFunc(cas, func(ca caState) bool { return ca.Key })
}

// leafDue reports whether the serving certificate has no more than
// RotateBefore left and a renewal by signer would last longer.
func leafDue(leaf *leafState, signer caState, p certPolicy, now time.Time) bool {
	return leaf.NotAfter.Sub(now) <= p.RotateBefore && signer.NotAfter.After(leaf.NotAfter)
}

// publishDue reports whether the hooks must be called now: the bundle has
// not been published, and no retry of a failure is pending.
func publishDue(unpublished bool, retryAt, now time.Time) bool {
	return unpublished && !now.Before(retryAt)
}

// retryDelay returns how long to wait before retrying after a failure,
// given the previous delay (zero after a success): certsMinRetry, doubling
// up to certsMaxRetry.
func retryDelay(prev time.Duration) time.Duration {
	return min(max(2*prev, certsMinRetry), certsMaxRetry)
}

// sameSANs reports whether dns and ips name exactly wantDNS and wantIPs,
// in any order.
func sameSANs(dns []string, ips []net.IP, wantDNS []string, wantIPs []net.IP) bool {
	norm := func(ips []net.IP) []string {
		out := make([]string, 0, len(ips))
		for _, ip := range ips {
			out = append(out, ip.To16().String())
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	sorted := func(s []string) []string {
		s = slices.Clone(s)
		slices.Sort(s)
		return slices.Compact(s)
	}
	return slices.Equal(sorted(dns), sorted(wantDNS)) && slices.Equal(norm(ips), norm(wantIPs))
}

// certTime is t as a certificate holds it: X.509 times have whole seconds.
func certTime(t time.Time) time.Time { return t.Truncate(time.Second) }
