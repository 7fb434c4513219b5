package webhook

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/pki"
)

// TestPlanScripts runs the scripts in testdata/plan: each walks the
// rotation plan through time, one action a line, and states what the plan
// must decide. The language:
//
//	# a comment
//	options dns=a.svc,b.svc ip=127.0.0.1 ca=100h cert=24h before=8h delay=1m [given-ca] [given-serving]
//	at TIME                  the time of the next plans
//	load ca NAME from TIME to TIME [nokey] [trusted=TIME]
//	                         a CA of the bundle, appended (list them newest
//	                         first), with its key unless nokey
//	load leaf by NAME|- from TIME to TIME [since=TIME] [dns=A,B] [ip=A,B]
//	                         the serving certificate, signed by NAME or by
//	                         none of the CAs; since defaults to the current
//	                         time, the names to the options'
//	load none                forget the CAs and the serving certificate
//	stale | unpublished      set certState.BundleStale or Unpublished
//	plan [force]             plan; the lines after it starting with "> " are
//	                         what it must decide, in this form and order:
//	                           > error: MESSAGE
//	                           > drop expired NAME
//	                           > new CA: REASON
//	                           > renew by NAME: REASON[, cut short by the CA]
//	                           > retire NAME
//	                           > bundle: NAME...        (BundleChanged)
//	                           > publish
//	                           > next TIME: WHY | next none
//	apply [NAME]             carry the last plan out on the state, as Certs
//	                         would; the CA it generates is called NAME
//	publish ok | publish fail
//	                         the hooks succeed (every CA is trusted from now)
//	                         or fail (a retry is scheduled with backoff)
//
// TIME is 2026-03-01T00:00Z (seconds optional), or +DURATION or -DURATION
// from the current time. Names in plans refer to the CAs as loaded; the CA
// a plan asks to generate is "new".
func TestPlanScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "plan", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/plan")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runPlanScript(t, file)
		})
	}
}

// scriptCA is a CA of a script's state.
type scriptCA struct {
	name string
	caState
}

// planScript is a script's state: a model of what Certs holds, which
// apply and publish change as Certs would.
type planScript struct {
	t          *testing.T
	pos        string // file:line, for errors
	policy     certPolicy
	now        time.Time
	cas        []scriptCA
	leaf       *leafState
	leafBy     string
	stale      bool
	unpub      bool
	retryAt    time.Time
	retryDelay time.Duration
	last       *certPlan  // the last plan, for apply
	lastState  *certState // what it was made from
	lastCAs    []scriptCA
}

func runPlanScript(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	s := &planScript{t: t, policy: certPolicy{
		CAValidity: 100 * time.Hour, CertValidity: 24 * time.Hour, RotateBefore: 8 * time.Hour,
		PropagationDelay: time.Minute, CARenew: 32 * time.Hour,
		DNSNames: []string{"webhook.system.svc"},
	}}
	plans := 0
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		s.pos = fmt.Sprintf("%s:%d", file, i+1)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, ">") {
			s.t.Fatalf("%s: expectation without a plan before it", s.pos)
		}
		words := strings.Fields(line)
		switch words[0] {
		case "options":
			s.options(words[1:])
		case "at":
			s.need(words, 2)
			s.now = s.time(words[1])
		case "load":
			s.load(words[1:])
		case "stale":
			s.stale = true
		case "unpublished":
			s.unpub = true
		case "plan":
			var want []string
			for i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), ">") {
				i++
				want = append(want, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), ">")))
			}
			got := s.plan(slices.Contains(words[1:], "force"))
			if !slices.Equal(got, want) {
				t.Errorf("%s: plan at %s decided\n> %s\nwant\n> %s", s.pos, fmtTime(s.now), strings.Join(got, "\n> "), strings.Join(want, "\n> "))
			}
			plans++
		case "apply":
			name := ""
			if len(words) > 1 {
				name = words[1]
			}
			s.apply(name)
		case "publish":
			s.need(words, 2)
			s.publish(words[1])
		default:
			t.Fatalf("%s: unknown action %q", s.pos, words[0])
		}
	}
	if plans == 0 {
		t.Fatalf("%s: no plan", file)
	}
}

func (s *planScript) need(words []string, n int) {
	if len(words) < n {
		s.t.Fatalf("%s: %q needs %d words", s.pos, strings.Join(words, " "), n)
	}
}

func (s *planScript) options(words []string) {
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "dns":
			s.policy.DNSNames = names(v)
		case "ip":
			s.policy.IPs = s.ips(v)
		case "ca":
			s.policy.CAValidity = s.duration(v)
		case "cert":
			s.policy.CertValidity = s.duration(v)
		case "before":
			s.policy.RotateBefore = s.duration(v)
		case "delay":
			s.policy.PropagationDelay = s.duration(v)
		case "given-ca":
			s.policy.GivenCA = true
		case "given-serving":
			s.policy.GivenServing = true
		default:
			s.t.Fatalf("%s: unknown option %q", s.pos, k)
		}
	}
	s.policy.CARenew = s.policy.CertValidity + s.policy.RotateBefore
}

func (s *planScript) load(words []string) {
	if len(words) == 0 {
		s.t.Fatalf("%s: load what?", s.pos)
	}
	switch words[0] {
	case "none":
		s.cas, s.leaf, s.leafBy = nil, nil, ""
	case "ca":
		s.need(words, 6)
		ca := scriptCA{name: words[1]}
		ca.Key = true
		s.span(words[2:6], &ca.NotBefore, &ca.NotAfter)
		for _, w := range words[6:] {
			k, v, _ := strings.Cut(w, "=")
			switch k {
			case "nokey":
				ca.Key = false
			case "trusted":
				ca.TrustedAt = s.time(v)
			default:
				s.t.Fatalf("%s: unknown CA attribute %q", s.pos, w)
			}
		}
		if s.caIndex(ca.name) >= 0 {
			s.t.Fatalf("%s: CA %s loaded twice", s.pos, ca.name)
		}
		s.cas = append(s.cas, ca)
	case "leaf":
		s.need(words, 7)
		if words[1] != "by" {
			s.t.Fatalf("%s: load leaf by NAME ...", s.pos)
		}
		l := &leafState{DNSNames: s.policy.DNSNames, IPs: s.policy.IPs, Since: s.now}
		s.span(words[3:7], &l.NotBefore, &l.NotAfter)
		for _, w := range words[7:] {
			k, v, _ := strings.Cut(w, "=")
			switch k {
			case "dns":
				l.DNSNames = names(v)
			case "ip":
				l.IPs = s.ips(v)
			case "since":
				l.Since = s.time(v)
			default:
				s.t.Fatalf("%s: unknown leaf attribute %q", s.pos, w)
			}
		}
		if words[2] != "-" && s.caIndex(words[2]) < 0 {
			s.t.Fatalf("%s: no CA %s", s.pos, words[2])
		}
		s.leaf, s.leafBy = l, words[2]
	default:
		s.t.Fatalf("%s: load %q?", s.pos, words[0])
	}
}

// span reads "from TIME to TIME".
func (s *planScript) span(words []string, from, to *time.Time) {
	if words[0] != "from" || words[2] != "to" {
		s.t.Fatalf("%s: want from TIME to TIME, got %q", s.pos, strings.Join(words, " "))
	}
	*from, *to = s.time(words[1]), s.time(words[3])
}

func (s *planScript) caIndex(name string) int {
	return slices.IndexFunc(s.cas, func(ca scriptCA) bool { return ca.name == name })
}

// state is the certState of the script's model.
func (s *planScript) state(force bool) certState {
	st := certState{Now: s.now, Force: force, BundleStale: s.stale, Unpublished: s.unpub, RetryAt: s.retryAt}
	for _, ca := range s.cas {
		st.CAs = append(st.CAs, ca.caState)
	}
	if s.leaf != nil {
		l := *s.leaf
		l.Issuer = s.caIndex(s.leafBy)
		st.Leaf = &l
	}
	return st
}

// plan runs planCerts and describes its decisions.
func (s *planScript) plan(force bool) []string {
	st := s.state(force)
	before := s.state(force)
	pl := planCerts(st, s.policy)
	if !reflect.DeepEqual(st, before) {
		s.t.Fatalf("%s: planCerts changed the state it was given", s.pos)
	}
	s.last, s.lastState, s.lastCAs = &pl, &st, slices.Clone(s.cas)
	name := func(i int) string { return s.cas[i].name }
	var out []string
	if pl.Err != nil {
		return []string{"error: " + pl.Err.Error()}
	}
	for _, i := range pl.Expired {
		out = append(out, "drop expired "+name(i))
	}
	if pl.NewCA != "" {
		out = append(out, "new CA: "+pl.NewCA)
	}
	if r := pl.Renew; r != nil {
		by := "new"
		if r.Signer != newCA {
			by = name(int(r.Signer))
		}
		line := fmt.Sprintf("renew by %s: %s", by, r.Reason)
		if r.CutShort {
			line += ", cut short by the CA"
		}
		out = append(out, line)
	}
	for _, i := range pl.Retired {
		out = append(out, "retire "+name(i))
	}
	if pl.BundleChanged {
		if s.policy.GivenServing {
			out = append(out, "bundle: given")
		} else {
			names := []string{}
			if pl.NewCA != "" {
				names = append(names, "new")
			}
			for i, ca := range s.cas {
				if !slices.Contains(pl.Expired, i) && !slices.Contains(pl.Retired, i) {
					names = append(names, ca.name)
				}
			}
			out = append(out, "bundle: "+strings.Join(names, " "))
		}
	}
	if pl.Publish {
		out = append(out, "publish")
	}
	if pl.Next.IsZero() {
		out = append(out, "next none")
	} else {
		out = append(out, fmt.Sprintf("next %s: %s", fmtTime(pl.Next), pl.NextWhy))
	}
	return out
}

// apply carries the last plan out on the model, as Certs.carryOut does
// with files, written here independently of planCerts.
func (s *planScript) apply(newName string) {
	pl, st := s.last, s.lastState
	if pl == nil {
		s.t.Fatalf("%s: apply without a plan", s.pos)
	}
	s.last = nil
	if !st.Now.Equal(s.now) || !slices.EqualFunc(s.cas, s.lastCAs, func(a, b scriptCA) bool { return a == b }) {
		s.t.Fatalf("%s: apply after a change of time or CAs: plan again first", s.pos)
	}
	if pl.Err != nil {
		s.fail()
		return
	}
	planned := slices.Clone(s.cas)
	gone := func(idx []int) {
		s.cas = slices.DeleteFunc(s.cas, func(ca scriptCA) bool {
			return slices.ContainsFunc(idx, func(i int) bool { return planned[i].name == ca.name })
		})
	}
	gone(pl.Expired)
	if pl.NewCA != "" {
		if newName == "" || s.caIndex(newName) >= 0 {
			s.t.Fatalf("%s: the plan generates a CA: apply NAME, with a new name", s.pos)
		}
		s.cas = slices.Insert(s.cas, 0, scriptCA{name: newName, caState: caState{
			NotBefore: s.now.Add(-pki.Backdate), NotAfter: s.now.Add(s.policy.CAValidity), Key: true,
		}})
	}
	if r := pl.Renew; r != nil {
		signer := newName
		if r.Signer != newCA {
			signer = planned[r.Signer].name
		}
		end := s.now.Add(s.policy.CertValidity)
		if caEnd := s.cas[s.caIndex(signer)].NotAfter; caEnd.Before(end) {
			end = caEnd
		}
		s.leaf = &leafState{NotBefore: s.now.Add(-pki.Backdate), NotAfter: end, DNSNames: s.policy.DNSNames, IPs: s.policy.IPs, Since: s.now}
		s.leafBy = signer
	}
	gone(pl.Retired)
	if pl.BundleChanged {
		s.stale, s.unpub = false, true
		s.retryAt, s.retryDelay = time.Time{}, 0
	}
}

// publish records the outcome of the hooks, as Certs.publish does.
func (s *planScript) publish(outcome string) {
	switch outcome {
	case "ok":
		for i := range s.cas {
			if s.cas[i].TrustedAt.IsZero() {
				s.cas[i].TrustedAt = s.now
			}
		}
		s.unpub = false
		s.retryAt, s.retryDelay = time.Time{}, 0
	case "fail":
		s.fail()
	default:
		s.t.Fatalf("%s: publish ok or publish fail", s.pos)
	}
}

func (s *planScript) fail() {
	s.retryDelay = retryDelay(s.retryDelay)
	s.retryAt = s.now.Add(s.retryDelay)
}

func (s *planScript) time(v string) time.Time {
	if strings.HasPrefix(v, "+") || strings.HasPrefix(v, "-") {
		d := s.duration(strings.TrimPrefix(v, "+"))
		return s.now.Add(d)
	}
	for _, layout := range []string{"2006-01-02T15:04Z07:00", time.RFC3339} {
		if t, err := time.Parse(layout, v); err == nil {
			return t
		}
	}
	s.t.Fatalf("%s: bad time %q", s.pos, v)
	return time.Time{}
}

func (s *planScript) duration(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		s.t.Fatalf("%s: %v", s.pos, err)
	}
	return d
}

func (s *planScript) ips(v string) []net.IP {
	var out []net.IP
	if v == "" {
		return nil
	}
	for _, p := range strings.Split(v, ",") {
		ip := net.ParseIP(p)
		if ip == nil {
			s.t.Fatalf("%s: bad IP %q", s.pos, p)
		}
		out = append(out, ip)
	}
	return out
}

// names splits a comma-separated list; an empty one is none.
func names(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// fmtTime prints t as scripts write it: UTC, seconds only when needed.
func fmtTime(t time.Time) string {
	t = t.UTC()
	if t.Second() == 0 && t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04Z")
	}
	return t.Format("2006-01-02T15:04:05Z")
}
