package webhook

import (
	"slices"
	"time"
)

// The plan of a CA shared through a Secret: what the leader must do next,
// decided from a summary of the Secret (sharedState) and the options
// (sharedPolicy). planShared does no I/O, reads no clock and generates no
// key; SharedCA.lead carries a plan out.
//
// A rotation goes through these states, each written to the Secret so
// that a new leader carries on where the old one stopped:
//
//  1. the new CA joins the bundle, beside the signer (NewCA);
//  2. the leader publishes the bundle (injects it) and records when
//     (Publish);
//  3. PropagationDelay later, the new CA becomes the signer (Switch); every
//     replica sees the change and renews its serving certificate;
//  4. PropagationDelay after the switch, the older CAs leave the bundle
//     (Retire), and the smaller bundle is published.

// sharedCAState is a CA of the Secret as the plan sees it.
type sharedCAState struct {
	NotBefore, NotAfter time.Time
	// Key is whether the Secret holds its private key.
	Key bool
}

// sharedState is what the plan decides from.
type sharedState struct {
	Now time.Time
	// CAs are the CAs of the Secret's bundle, newest first.
	CAs []sharedCAState
	// Signer is the index in CAs of the CA that signs serving
	// certificates; -1 when the Secret names none that it holds.
	Signer int
	// SignerSince is when Signer became the signer.
	SignerSince time.Time
	// Published is whether the bundle as it is has been published, and
	// PublishedAt when.
	Published   bool
	PublishedAt time.Time
	// RotateAsked is whether someone asked for a rotation that has not
	// begun yet.
	RotateAsked bool
}

// sharedPolicy is what the plan needs of SharedCAOptions, defaults
// applied.
type sharedPolicy struct {
	// CAValidity is the lifetime of a new CA.
	CAValidity time.Duration
	// Renew: the signer is replaced when no more than this is left of it.
	Renew time.Duration
	// PropagationDelay is how long a published bundle, or a new signer,
	// is given to reach every caller and replica.
	PropagationDelay time.Duration
}

// sharedPlan is what one step of the leader must do, in this order: drop
// the Expired CAs, add a CA if NewCA says so, switch the signer, retire
// the older CAs; write the Secret if any of those happened; then publish
// the bundle if Publish says so.
type sharedPlan struct {
	// Expired are the CAs (indexes into sharedState.CAs) that have
	// expired and are not the signer.
	Expired []int
	// NewCA says why a CA must be generated; empty when none.
	NewCA string
	// SignNow makes the new CA the signer at once: there is no usable
	// signer, so nothing can be broken by waiting less.
	SignNow bool
	// Switch makes the newest CA the signer (after NewCA, if any, it is
	// never that one).
	Switch bool
	// Retire drops the CAs older than the signer.
	Retire bool
	// Publish calls the hooks with the bundle as the plan leaves it.
	Publish bool
	// Next is when something falls due if nothing else happens, and
	// NextWhy what; zero when nothing will.
	Next    time.Time
	NextWhy string
}

// Changed reports whether the plan changes the Secret's CAs or signer.
func (p sharedPlan) Changed() bool {
	return len(p.Expired) > 0 || p.NewCA != "" || p.Switch || p.Retire
}

// planShared decides what the leader must do at s.Now.
func planShared(s sharedState, p sharedPolicy) sharedPlan {
	now := s.Now
	var pl sharedPlan
	cas := slices.Clone(s.CAs)
	signer := s.Signer
	if signer >= 0 && (signer >= len(cas) || !cas[signer].Key) {
		signer = -1
	}
	for i := len(cas) - 1; i >= 0; i-- {
		if i != signer && !now.Before(cas[i].NotAfter) {
			pl.Expired = append(pl.Expired, i)
			cas = slices.Delete(cas, i, i+1)
			if signer > i {
				signer--
			}
		}
	}
	slices.Reverse(pl.Expired)

	switch {
	case signer < 0:
		pl.NewCA, pl.SignNow = "no CA to sign with", true
	case !now.Before(cas[signer].NotAfter):
		pl.NewCA, pl.SignNow = "the signing CA expired", true
	case signer == 0 && s.RotateAsked:
		pl.NewCA = "rotation asked for"
	case signer == 0 && cas[0].NotAfter.Sub(now) <= p.Renew:
		pl.NewCA = "the signing CA is due for renewal"
	}
	since := s.SignerSince
	if pl.NewCA != "" {
		cas = slices.Insert(cas, 0, sharedCAState{NotBefore: now, NotAfter: now.Add(p.CAValidity), Key: true})
		if pl.SignNow {
			signer, since = 0, now
		} else {
			signer++
		}
	}
	published := s.Published && len(pl.Expired) == 0 && pl.NewCA == ""
	if !pl.SignNow && signer > 0 && cas[0].Key && published && !now.Before(s.PublishedAt.Add(p.PropagationDelay)) {
		pl.Switch, signer, since = true, 0, now
	}
	if signer == 0 && len(cas) > 1 && !now.Before(since.Add(p.PropagationDelay)) {
		pl.Retire = true
		cas = cas[:1]
		published = false
	}
	pl.Publish = !published

	at := func(t time.Time, why string) {
		if t.After(now) && (pl.Next.IsZero() || t.Before(pl.Next)) {
			pl.Next, pl.NextWhy = t, why
		}
	}
	for i, ca := range cas {
		at(ca.NotAfter, "a CA expires")
		if i == signer {
			at(ca.NotAfter.Add(-p.Renew), "the signing CA is due for renewal")
		}
	}
	if signer > 0 && !pl.Publish {
		at(s.PublishedAt.Add(p.PropagationDelay), "the new CA has been published long enough to sign")
	}
	if signer == 0 && len(cas) > 1 {
		at(since.Add(p.PropagationDelay), "the older CAs leave the bundle")
	}
	return pl
}
