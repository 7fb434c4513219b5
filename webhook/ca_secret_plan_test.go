package webhook

import (
	"testing"
	"time"
)

// applyShared carries pl out on s as SharedCA.lead does, publishing at
// once, and returns the state that follows.
func applyShared(s sharedState, pl sharedPlan, p sharedPolicy) sharedState {
	var cas []sharedCAState
	signer := s.Signer
	for i, ca := range s.CAs {
		dropped := false
		for _, e := range pl.Expired {
			dropped = dropped || e == i
		}
		if dropped {
			if signer > i {
				signer--
			}
			continue
		}
		cas = append(cas, ca)
	}
	if pl.NewCA != "" {
		cas = append([]sharedCAState{{NotBefore: s.Now, NotAfter: s.Now.Add(p.CAValidity), Key: true}}, cas...)
		signer++
		if pl.SignNow {
			signer = 0
			s.SignerSince = s.Now
		}
		s.RotateAsked = false
	}
	if pl.Switch {
		signer = 0
		s.SignerSince = s.Now
	}
	if pl.Retire {
		cas = cas[:1]
	}
	if len(pl.Expired) > 0 || pl.NewCA != "" || pl.Retire {
		s.Published = false
	}
	if pl.Publish {
		s.Published, s.PublishedAt = true, s.Now
	}
	s.CAs, s.Signer = cas, signer
	return s
}

// TestPlanSharedRotation walks a shared CA from nothing through a renewal:
// a new CA, published, then signing PropagationDelay after publication,
// then the old CA retired PropagationDelay after the switch. At no step
// does the signer sign with a CA that was not published long enough ago.
func TestPlanSharedRotation(t *testing.T) {
	p := sharedPolicy{CAValidity: 100 * time.Hour, Renew: 30 * time.Hour, PropagationDelay: time.Minute}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	s := sharedState{Now: t0, Signer: -1}

	pl := planShared(s, p)
	if pl.NewCA == "" || !pl.SignNow || !pl.Publish {
		t.Fatalf("empty Secret: %+v; want a CA that signs at once, published", pl)
	}
	s = applyShared(s, pl, p)

	// Nothing to do until renewal is due.
	s.Now = t0.Add(time.Hour)
	pl = planShared(s, p)
	if pl.Changed() || pl.Publish {
		t.Fatalf("steady state: %+v", pl)
	}
	if want := t0.Add(70 * time.Hour); !pl.Next.Equal(want) {
		t.Fatalf("next %v (%s), want renewal at %v", pl.Next, pl.NextWhy, want)
	}

	// Renewal: a new CA joins, not signing yet.
	s.Now = pl.Next
	pl = planShared(s, p)
	if pl.NewCA == "" || pl.SignNow || pl.Switch || !pl.Publish {
		t.Fatalf("renewal: %+v", pl)
	}
	s = applyShared(s, pl, p)
	if s.Signer != 1 || len(s.CAs) != 2 {
		t.Fatalf("after renewal: signer %d of %d CAs", s.Signer, len(s.CAs))
	}
	published := s.PublishedAt

	// Not yet: the bundle was published less than PropagationDelay ago.
	s.Now = published.Add(30 * time.Second)
	if pl = planShared(s, p); pl.Switch || pl.Changed() {
		t.Fatalf("switch before the bundle propagated: %+v", pl)
	}
	if want := published.Add(time.Minute); !pl.Next.Equal(want) {
		t.Fatalf("next %v (%s), want the switch at %v", pl.Next, pl.NextWhy, want)
	}
	s.Now = pl.Next
	pl = planShared(s, p)
	if !pl.Switch || pl.Retire || pl.Publish {
		t.Fatalf("switch: %+v", pl)
	}
	s = applyShared(s, pl, p)
	switched := s.Now

	// The old CA stays until every replica had time to renew.
	s.Now = switched.Add(59 * time.Second)
	if pl = planShared(s, p); pl.Retire {
		t.Fatalf("retired before the replicas renewed: %+v", pl)
	}
	s.Now = pl.Next
	pl = planShared(s, p)
	if !pl.Retire || !pl.Publish {
		t.Fatalf("retire: %+v", pl)
	}
	s = applyShared(s, pl, p)
	if len(s.CAs) != 1 || s.Signer != 0 {
		t.Fatalf("after retiring: signer %d of %d CAs", s.Signer, len(s.CAs))
	}
}

// TestPlanSharedRotateAsked: a rotation asked for starts at once, and goes
// the same way as a renewal; a second ask during it starts nothing more.
func TestPlanSharedRotateAsked(t *testing.T) {
	p := sharedPolicy{CAValidity: 100 * time.Hour, Renew: 30 * time.Hour, PropagationDelay: time.Minute}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	s := sharedState{Now: t0, Signer: 0, SignerSince: t0, Published: true, PublishedAt: t0,
		CAs: []sharedCAState{{NotBefore: t0, NotAfter: t0.Add(100 * time.Hour), Key: true}}, RotateAsked: true}
	pl := planShared(s, p)
	if pl.NewCA != "rotation asked for" || pl.SignNow {
		t.Fatalf("asked: %+v", pl)
	}
	s = applyShared(s, pl, p)
	s.RotateAsked = true
	if pl = planShared(s, p); pl.NewCA != "" {
		t.Fatalf("a second CA during a rotation: %+v", pl)
	}
}

// TestPlanSharedBroken: an expired signer, a signer without its key, and
// a Secret whose signer names no CA of the bundle all get a CA that signs
// at once; expired CAs that do not sign leave the bundle.
func TestPlanSharedBroken(t *testing.T) {
	p := sharedPolicy{CAValidity: 100 * time.Hour, Renew: 30 * time.Hour, PropagationDelay: time.Minute}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	good := sharedCAState{NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(90 * time.Hour), Key: true}
	expired := sharedCAState{NotBefore: t0.Add(-200 * time.Hour), NotAfter: t0.Add(-time.Hour), Key: true}
	for name, s := range map[string]sharedState{
		"expired signer":     {Now: t0, CAs: []sharedCAState{expired}, Signer: 0, Published: true},
		"signer without key": {Now: t0, CAs: []sharedCAState{{NotBefore: t0, NotAfter: t0.Add(90 * time.Hour)}}, Signer: 0, Published: true},
		"unknown signer":     {Now: t0, CAs: []sharedCAState{good}, Signer: -1, Published: true},
	} {
		pl := planShared(s, p)
		if pl.NewCA == "" || !pl.SignNow || !pl.Publish {
			t.Errorf("%s: %+v; want a CA that signs at once", name, pl)
		}
	}
	s := sharedState{Now: t0, CAs: []sharedCAState{good, expired}, Signer: 0, SignerSince: t0.Add(-time.Hour), Published: true}
	pl := planShared(s, p)
	if len(pl.Expired) != 1 || pl.Expired[0] != 1 || !pl.Publish || pl.NewCA != "" {
		t.Fatalf("expired old CA: %+v", pl)
	}
}
