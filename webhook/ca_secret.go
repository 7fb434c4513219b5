package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/pki"
	"github.com/loom-k8s/loom/rest"
)

// The keys and annotations of the Secret that SharedCA keeps.
const (
	// SharedCACertKey holds the CA bundle (PEM): every CA that callers
	// must trust, newest first.
	SharedCACertKey = "ca.crt"
	// SharedCAKeyKey holds the CAs' private keys (PEM, PKCS #8).
	SharedCAKeyKey = "ca.key"
	// SharedCASignerAnnotation holds the serial number (hex) of the CA
	// that signs the replicas' serving certificates.
	SharedCASignerAnnotation = "webhook.loom.dev/signer"
	// SharedCASignerSinceAnnotation holds when that CA began to sign
	// (RFC 3339, with fractions of a second).
	SharedCASignerSinceAnnotation = "webhook.loom.dev/signer-since"
	// SharedCAPublishedAnnotation holds the SHA-256 of the bundle the
	// leader last published, a space, and when (RFC 3339).
	SharedCAPublishedAnnotation = "webhook.loom.dev/published"
	// SharedCARotateAnnotation asks the leader for a CA rotation: set it
	// to any new value (kubectl annotate --overwrite secret NAME
	// webhook.loom.dev/rotate="$(date +%s)"); the leader starts one when
	// it differs from SharedCARotatedAnnotation, and copies it there.
	SharedCARotateAnnotation  = "webhook.loom.dev/rotate"
	SharedCARotatedAnnotation = "webhook.loom.dev/rotated"
)

// Defaults of SharedCAOptions.
const (
	DefaultSharedCAValidity = 365 * 24 * time.Hour
)

// ErrSharedCA is wrapped by the errors of SharedCA about its options and
// its Secret.
var ErrSharedCA = errors.New("webhook: shared CA")

// SharedCAOptions configure NewSharedCA. REST, Namespace and Name are
// required; every other zero value means the documented default.
type SharedCAOptions struct {
	// REST is the connection to the API server. Required.
	REST *rest.Client
	// Namespace and Name name the Secret that holds the CA: the
	// operator's own namespace, and a name that the operator's RBAC
	// grants (get, list, watch, update by resourceNames; create in the
	// namespace). Required.
	Namespace, Name string
	// CAValidity is the lifetime of a CA. Default DefaultSharedCAValidity
	// (one year).
	CAValidity time.Duration
	// RenewBefore: the leader starts a rotation when no more than this is
	// left of the signing CA. Default a third of CAValidity. It must be
	// longer than the serving certificates' CertValidity, so that no
	// serving certificate is cut short by its CA.
	RenewBefore time.Duration
	// PropagationDelay is how long a published bundle is given to reach
	// every caller before its new CA signs, and how long a new signer is
	// given to reach every replica before the old CA leaves the bundle.
	// Default one minute.
	PropagationDelay time.Duration
	// Resync is how often the leader publishes the bundle again though
	// nothing changed, so that a webhook configuration or CRD applied
	// anew (without caBundle) is repaired. Default one minute.
	Resync time.Duration
	// Logger receives what the CA does (never keys). Nil means discard.
	Logger *slog.Logger

	clock clock.Clock // tests fake time through export_test.go; nil means the real clock
}

// SharedCA keeps the CA of a webhook served by several replicas in a
// Secret, so that every replica's serving certificate is signed by a CA
// that the one caBundle trusts, whichever replica a call reaches.
//
// Every replica calls Load (the first creates the Secret; a create that
// loses the race reads the winner's CA), makes its Certs with the CA it
// returns, hands them to Follow, and runs Start, which watches the Secret
// and calls Certs.SetCA when it changes. One replica, the leader, runs
// Lead: it publishes the bundle through the OnRotate hooks (an Injector)
// and rotates the CA ahead of its expiry, in steps that never leave a
// caller with a certificate it cannot verify (see planShared).
//
// The CA's private key is in the Secret: whoever can read that Secret can
// sign certificates that callers of the webhook trust. Grant it to the
// operator's service account only.
type SharedCA struct {
	opts    SharedCAOptions
	policy  sharedPolicy
	secrets *client.Client[*corev1.Secret]
	clock   clock.Clock
	log     *slog.Logger
	changed chan struct{} // the Secret changed (Start tells Lead)

	mu      sync.Mutex
	hooks   []func(ctx context.Context, caBundle []byte) error
	follow  []*Certs
	applied []byte // the bundle and signer last handed to follow
}

// NewSharedCA checks opts and returns a SharedCA. It makes no request.
func NewSharedCA(opts SharedCAOptions) (*SharedCA, error) {
	if opts.REST == nil || opts.Namespace == "" || opts.Name == "" {
		return nil, fmt.Errorf("%w: REST, Namespace and Name are required", ErrSharedCA)
	}
	if opts.CAValidity < 0 || opts.RenewBefore < 0 || opts.PropagationDelay < 0 || opts.Resync < 0 {
		return nil, fmt.Errorf("%w: negative duration", ErrSharedCA)
	}
	if opts.CAValidity == 0 {
		opts.CAValidity = DefaultSharedCAValidity
	}
	if opts.RenewBefore == 0 {
		opts.RenewBefore = opts.CAValidity / 3
	}
	if opts.RenewBefore >= opts.CAValidity {
		return nil, fmt.Errorf("%w: RenewBefore %v is not shorter than CAValidity %v", ErrSharedCA, opts.RenewBefore, opts.CAValidity)
	}
	if opts.PropagationDelay == 0 {
		opts.PropagationDelay = DefaultPropagationDelay
	}
	if opts.Resync == 0 {
		opts.Resync = time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	secrets, err := client.For[corev1.Secret](opts.REST, client.Options{})
	if err != nil {
		return nil, err
	}
	return &SharedCA{
		opts:    opts,
		policy:  sharedPolicy{CAValidity: opts.CAValidity, Renew: opts.RenewBefore, PropagationDelay: opts.PropagationDelay},
		secrets: secrets.Namespace(opts.Namespace),
		clock:   clock.OrReal(opts.clock),
		log:     log.With("secret", opts.Namespace+"/"+opts.Name),
		changed: make(chan struct{}, 1),
	}, nil
}

// OnRotate registers f to be called by Lead with the CA bundle each time it
// changes, once when Lead starts, and every Resync. Hooks must be
// idempotent, as Injector.Inject is. Register them before Lead.
func (s *SharedCA) OnRotate(f func(ctx context.Context, caBundle []byte) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = append(s.hooks, f)
}

// Follow makes Start hand every change of the Secret's CA to c (made with
// CertOptions.CA from Load). Call it before Start.
func (s *SharedCA) Follow(c *Certs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.follow = append(s.follow, c)
}

// Load returns the CA that signs, for CertOptions.CA: Cert is the whole
// bundle. It reads the Secret, or creates it with a new CA when it is
// missing. Two replicas that create it at once cannot both win: the
// loser reads the winner's CA.
func (s *SharedCA) Load(ctx context.Context) (*CAKeyPair, error) {
	for range 5 {
		sec, ok, err := client.Optional(s.secrets.Get(ctx, s.opts.Name, metav1.GetOptions{}))
		if err != nil {
			return nil, fmt.Errorf("%w: reading Secret %s/%s: %w", ErrSharedCA, s.opts.Namespace, s.opts.Name, err)
		}
		if ok {
			pair, err := signerPair(sec)
			if err == nil {
				return pair, nil
			}
			s.log.Warn("webhook: shared CA Secret has no usable CA; adding a new one", "err", err)
		}
		now := s.clock.Now()
		ca, err := pki.NewCA(fmt.Sprintf("loom-webhook-ca@%d", now.Unix()), now, now.Add(s.opts.CAValidity))
		if err != nil {
			return nil, fmt.Errorf("%w: generating a CA: %w", ErrSharedCA, err)
		}
		if !ok {
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.opts.Name, Namespace: s.opts.Namespace}, Type: corev1.SecretTypeOpaque}
			if err := writeShared(sec, []*pki.CA{ca}, 0, now); err != nil {
				return nil, err
			}
			_, err = s.secrets.Create(ctx, sec, metav1.CreateOptions{})
		} else {
			// Repair: the new CA signs at once, beside what the bundle
			// held. An update that another replica's beat fails with a
			// conflict, and the loop reads the winner's CA.
			cas := slices.Insert(decodeShared(sec), 0, ca)
			if err := writeShared(sec, cas, 0, now); err != nil {
				return nil, err
			}
			_, err = s.secrets.Update(ctx, sec, metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			s.log.Info("webhook: shared CA created", "serial", ca.Cert.SerialNumber.Text(16), "notAfter", ca.Cert.NotAfter)
			return signerPair(sec)
		case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
			continue // another replica won: read its CA
		default:
			return nil, fmt.Errorf("%w: writing Secret %s/%s: %w", ErrSharedCA, s.opts.Namespace, s.opts.Name, err)
		}
	}
	return nil, fmt.Errorf("%w: Secret %s/%s: no usable CA after 5 tries", ErrSharedCA, s.opts.Namespace, s.opts.Name)
}

// Start watches the Secret until ctx ends, and hands every change of its
// CA to the Certs given to Follow. Every replica runs it.
func (s *SharedCA) Start(ctx context.Context) error {
	inf := cache.NewInformer(cache.ListWatch(s.secrets, cache.ListWatchOptions{FieldSelector: "metadata.name=" + s.opts.Name}),
		cache.InformerOptions[*corev1.Secret]{})
	apply := func(sec *corev1.Secret) {
		select {
		case s.changed <- struct{}{}:
		default:
		}
		if err := s.apply(sec); err != nil {
			s.log.Error("webhook: shared CA not applied", "err", err)
		}
	}
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.Secret]{
		Add:    func(sec *corev1.Secret, _ bool) { apply(sec) },
		Update: func(_, sec *corev1.Secret) { apply(sec) },
	}, cache.HandlerOptions{}); err != nil {
		return err
	}
	return inf.Start(ctx)
}

// apply hands the Secret's signer and bundle to the followed Certs, if
// they changed.
func (s *SharedCA) apply(sec *corev1.Secret) error {
	pair, err := signerPair(sec)
	if err != nil {
		return err
	}
	key := append(slices.Clone(pair.Cert), pair.Key...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Equal(key, s.applied) {
		return nil
	}
	var errs []error
	for _, c := range s.follow {
		errs = append(errs, c.SetCA(*pair))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.applied = key
	s.log.Info("webhook: shared CA applied", "cas", len(pki.DecodeCerts(pair.Cert)))
	return nil
}

// Rotate asks the leader for a CA rotation, by setting
// SharedCARotateAnnotation on the Secret.
func (s *SharedCA) Rotate(ctx context.Context) error {
	_, err := s.secrets.Mutate(ctx, s.opts.Name, func(sec *corev1.Secret) error {
		if sec.Annotations == nil {
			sec.Annotations = map[string]string{}
		}
		sec.Annotations[SharedCARotateAnnotation] = s.clock.Now().UTC().Format(time.RFC3339Nano)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: asking for a rotation: %w", ErrSharedCA, err)
	}
	return nil
}

// Lead publishes the bundle and rotates the CA until ctx ends. Run it on
// one replica at a time: the leader (the manager runs it as a leader
// runnable). Errors on the way are logged and retried with backoff.
func (s *SharedCA) Lead(ctx context.Context) error {
	var delay time.Duration
	lastPublish := time.Time{}
	for {
		next, published, err := s.leadStep(ctx, lastPublish)
		if ctx.Err() != nil {
			return nil
		}
		wait := time.Duration(0)
		if err != nil {
			delay = retryDelay(delay)
			wait = delay
			s.log.Error("webhook: shared CA", "err", err)
		} else {
			delay = 0
			if !published.IsZero() {
				lastPublish = published
			}
			now := s.clock.Now()
			wait = lastPublish.Add(s.opts.Resync).Sub(now)
			if !next.IsZero() {
				wait = min(wait, next.Sub(now))
			}
			wait = min(max(wait, 0), certsMaxWait)
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		case <-s.changed:
			t.Stop()
		}
	}
}

// leadStep reads the Secret, plans, writes what the plan changed, and
// publishes. It returns when the next step is due (zero: at the next
// resync), and when it published (zero if it did not).
func (s *SharedCA) leadStep(ctx context.Context, lastPublish time.Time) (next, published time.Time, err error) {
	sec, err := s.secrets.Get(ctx, s.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := s.Load(ctx); err != nil {
			return time.Time{}, time.Time{}, err
		}
		sec, err = s.secrets.Get(ctx, s.opts.Name, metav1.GetOptions{})
	}
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("%w: reading Secret: %w", ErrSharedCA, err)
	}
	now := s.clock.Now()
	st, cas := readShared(sec, now)
	pl := planShared(st, s.policy)
	if pl.Changed() {
		signer := st.Signer
		kept := make([]*pki.CA, 0, len(cas)+1)
		for i, ca := range cas {
			if slices.Contains(pl.Expired, i) {
				if signer > i {
					signer--
				}
				continue
			}
			kept = append(kept, ca)
		}
		since := now
		if v, err := time.Parse(time.RFC3339, sec.Annotations[SharedCASignerSinceAnnotation]); err == nil && !pl.SignNow && !pl.Switch {
			since = v
		}
		if pl.NewCA != "" {
			ca, err := pki.NewCA(fmt.Sprintf("loom-webhook-ca@%d", now.Unix()), now, now.Add(s.opts.CAValidity))
			if err != nil {
				return time.Time{}, time.Time{}, fmt.Errorf("%w: generating a CA: %w", ErrSharedCA, err)
			}
			kept = slices.Insert(kept, 0, ca)
			signer++
			if pl.SignNow {
				signer = 0
			}
			if sec.Annotations != nil {
				if v, ok := sec.Annotations[SharedCARotateAnnotation]; ok {
					sec.Annotations[SharedCARotatedAnnotation] = v
				}
			}
			s.log.Info("webhook: shared CA generated", "reason", pl.NewCA, "serial", ca.Cert.SerialNumber.Text(16), "notAfter", ca.Cert.NotAfter)
		}
		if pl.Switch {
			signer = 0
			s.log.Info("webhook: shared CA switched to the new CA", "serial", kept[0].Cert.SerialNumber.Text(16))
		}
		if pl.Retire {
			for _, ca := range kept[1:] {
				s.log.Info("webhook: old CA dropped from the bundle", "serial", ca.Cert.SerialNumber.Text(16))
			}
			kept = kept[:1]
		}
		if err := writeShared(sec, kept, signer, since); err != nil {
			return time.Time{}, time.Time{}, err
		}
		if sec, err = s.secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("%w: updating Secret: %w", ErrSharedCA, err)
		}
		// Plan again from what was written: publishing comes next.
		st, _ = readShared(sec, now)
		pl = planShared(st, s.policy)
	}
	if !pl.Publish && !lastPublish.IsZero() && now.Before(lastPublish.Add(s.opts.Resync)) {
		return pl.Next, time.Time{}, nil
	}
	bundle := sec.Data[SharedCACertKey]
	if err := s.publish(ctx, bundle); err != nil {
		return time.Time{}, time.Time{}, err
	}
	if pl.Publish {
		mark := bundleSum(bundle) + " " + now.UTC().Format(time.RFC3339Nano)
		_, err := s.secrets.Mutate(ctx, s.opts.Name, func(cur *corev1.Secret) error {
			if !bytes.Equal(cur.Data[SharedCACertKey], bundle) {
				return fmt.Errorf("%w: the bundle changed while it was published", ErrSharedCA)
			}
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[SharedCAPublishedAnnotation] = mark
			return nil
		})
		if err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("%w: recording the publication: %w", ErrSharedCA, err)
		}
		st.Published, st.PublishedAt = true, now
		pl = planShared(st, s.policy)
	}
	return pl.Next, now, nil
}

// publish calls the hooks with bundle.
func (s *SharedCA) publish(ctx context.Context, bundle []byte) error {
	s.mu.Lock()
	hooks := slices.Clone(s.hooks)
	s.mu.Unlock()
	var errs []error
	for _, h := range hooks {
		errs = append(errs, h(ctx, bytes.Clone(bundle)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhook: publishing the shared CA bundle: %w", err)
	}
	return nil
}

// readShared sums the Secret up for the plan, and returns its CAs (newest
// first, with their keys where the Secret holds them).
func readShared(sec *corev1.Secret, now time.Time) (sharedState, []*pki.CA) {
	cas := decodeShared(sec)
	st := sharedState{Now: now, Signer: -1}
	serial := sec.Annotations[SharedCASignerAnnotation]
	for i, ca := range cas {
		st.CAs = append(st.CAs, sharedCAState{NotBefore: ca.Cert.NotBefore, NotAfter: ca.Cert.NotAfter, Key: ca.Key != nil})
		if ca.Cert.SerialNumber.Text(16) == serial {
			st.Signer = i
		}
	}
	if v, err := time.Parse(time.RFC3339, sec.Annotations[SharedCASignerSinceAnnotation]); err == nil {
		st.SignerSince = v
	}
	if sum, at, ok := strings.Cut(sec.Annotations[SharedCAPublishedAnnotation], " "); ok && sum == bundleSum(sec.Data[SharedCACertKey]) {
		if t, err := time.Parse(time.RFC3339, at); err == nil {
			st.Published, st.PublishedAt = true, t
		}
	}
	if v, ok := sec.Annotations[SharedCARotateAnnotation]; ok && v != sec.Annotations[SharedCARotatedAnnotation] {
		st.RotateAsked = true
	}
	return st, cas
}

// decodeShared returns the Secret's CAs, newest first, each with its key
// when the Secret holds it. Certificates that are not CAs are skipped.
func decodeShared(sec *corev1.Secret) []*pki.CA {
	keys, _ := pki.DecodeKeys(sec.Data[SharedCAKeyKey])
	var cas []*pki.CA
	for _, cert := range pki.DecodeCerts(sec.Data[SharedCACertKey]) {
		if !cert.IsCA || slices.ContainsFunc(cas, func(o *pki.CA) bool { return bytes.Equal(o.Cert.Raw, cert.Raw) }) {
			continue
		}
		ca := &pki.CA{Cert: cert, CertPEM: pki.EncodeCert(cert)}
		for _, k := range keys {
			if pki.Matches(cert, k) {
				ca.Key = k
			}
		}
		cas = append(cas, ca)
	}
	sort.SliceStable(cas, func(i, j int) bool { return cas[i].Cert.NotBefore.After(cas[j].Cert.NotBefore) })
	return cas
}

// writeShared sets the Secret's data to cas, with cas[signer] the signer
// since the given time. The published mark stays: it names the bundle it
// was for, so a changed bundle reads as unpublished.
func writeShared(sec *corev1.Secret, cas []*pki.CA, signer int, since time.Time) error {
	var bundle, keys []byte
	for _, ca := range cas {
		bundle = append(bundle, ca.CertPEM...)
		if ca.Key != nil {
			k, err := pki.EncodeKey(ca.Key)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrSharedCA, err)
			}
			keys = append(keys, k...)
		}
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[SharedCACertKey], sec.Data[SharedCAKeyKey] = bundle, keys
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[SharedCASignerAnnotation] = cas[signer].Cert.SerialNumber.Text(16)
	sec.Annotations[SharedCASignerSinceAnnotation] = since.UTC().Format(time.RFC3339Nano)
	return nil
}

// signerPair returns the Secret's signing CA as a CAKeyPair whose Cert is
// the whole bundle, or an error that says why there is none.
func signerPair(sec *corev1.Secret) (*CAKeyPair, error) {
	serial := sec.Annotations[SharedCASignerAnnotation]
	for _, ca := range decodeShared(sec) {
		if ca.Cert.SerialNumber.Text(16) != serial {
			continue
		}
		if ca.Key == nil {
			return nil, fmt.Errorf("%w: Secret %s/%s holds no key for its signing CA %s", ErrSharedCA, sec.Namespace, sec.Name, serial)
		}
		key, err := pki.EncodeKey(ca.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSharedCA, err)
		}
		return &CAKeyPair{Cert: bytes.Clone(sec.Data[SharedCACertKey]), Key: key}, nil
	}
	return nil, fmt.Errorf("%w: Secret %s/%s names no CA of its bundle as the signer (annotation %s=%q)", ErrSharedCA, sec.Namespace, sec.Name, SharedCASignerAnnotation, serial)
}

// bundleSum is the hex SHA-256 of a bundle, as the published mark holds it.
func bundleSum(bundle []byte) string {
	sum := sha256.Sum256(bundle)
	return hex.EncodeToString(sum[:])
}
