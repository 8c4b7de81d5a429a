package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
)

// The names the legacy token flags stand for.
const (
	// LegacyAgent is the identity of the bearer token of --token-file.
	LegacyAgent = "agent"
	// LegacyOperator is the identity of the operator token of
	// --operator-token-file (sent in the Mhp-Operator header).
	LegacyOperator = "operator"
)

// Config says where an [Authenticator] finds its identities. The zero
// Config authenticates nobody and requires nothing: every request is the
// anonymous agent (Via "none"), today's loopback behaviour.
type Config struct {
	// CredentialsFile is a YAML list of [Credential]s, re-read when it
	// changes (checked at most every CheckEvery) and on [Authenticator.Reload].
	CredentialsFile string
	// Token is the legacy bearer token (--token-file): the agent identity
	// named [LegacyAgent].
	Token string
	// OperatorToken is the legacy operator token (--operator-token-file),
	// sent in the Mhp-Operator header: the operator identity named
	// [LegacyOperator]. Alone it does not make credentials required.
	OperatorToken string
	// ClientCerts says the server verifies client certificates (mutual TLS,
	// --client-ca). A verified certificate that no credential names signs
	// in as an agent named by its subject common name when there is no
	// CredentialsFile; with one, it must be named there.
	ClientCerts bool
	// CheckEvery bounds how often the credentials file's modification time
	// is looked at; default 1s.
	CheckEvery time.Duration
	// Logger reports reloads and reload failures; default slog.Default().
	Logger *slog.Logger
}

// Validate reports an unusable configuration: a credentials file that does
// not load, or legacy tokens that are the same.
func (c Config) Validate() error {
	if c.Token != "" && c.Token == c.OperatorToken {
		return errors.New("auth: the operator token must differ from the bearer token (agents hold that one)")
	}
	if c.CheckEvery < 0 {
		return fmt.Errorf("auth: CheckEvery %v is negative", c.CheckEvery)
	}
	if c.CredentialsFile != "" {
		if _, err := LoadCredentials(c.CredentialsFile); err != nil {
			return err
		}
	}
	return nil
}

// Authenticator decides who a request is: from its verified client
// certificate, its bearer token, or the legacy operator header. It is safe
// for concurrent use; a nil *Authenticator requires nothing.
type Authenticator struct {
	cfg     Config
	opToken [32]byte
	legacy  [32]byte

	mu      sync.RWMutex
	set     credSet
	mod     time.Time
	size    int64
	checked time.Time
	err     error // the last reload's failure (the previous set stays)
}

// credSet is one loaded credentials file, indexed.
type credSet struct {
	tokens []tokenCred // by hash, compared in constant time
	cns    map[string]Identity
	sans   map[string]Identity
}

type tokenCred struct {
	sum [32]byte
	id  Identity
}

// New builds an Authenticator from cfg, loading the credentials file.
func New(cfg Config) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Authenticator{cfg: cfg, opToken: sha256.Sum256([]byte(cfg.OperatorToken)), legacy: sha256.Sum256([]byte(cfg.Token))}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Required reports whether a request must present a credential: a
// credentials file, a bearer token or client certificates are configured.
func (a *Authenticator) Required() bool {
	return a != nil && (a.cfg.CredentialsFile != "" || a.cfg.Token != "" || a.cfg.ClientCerts)
}

// Reload re-reads the credentials file now (SIGHUP). On failure the
// identities loaded before stay and the error is returned.
func (a *Authenticator) Reload() error {
	if a == nil || a.cfg.CredentialsFile == "" {
		return nil
	}
	st, statErr := os.Stat(a.cfg.CredentialsFile)
	creds, err := LoadCredentials(a.cfg.CredentialsFile)
	set := credSet{cns: map[string]Identity{}, sans: map[string]Identity{}}
	for _, c := range creds {
		switch {
		case c.TokenSHA256 != "":
			var tc tokenCred
			raw, _ := hex.DecodeString(c.TokenSHA256) // checked by ParseCredentials
			copy(tc.sum[:], raw)
			tc.id = Identity{Name: c.Name, Role: c.Role, Via: "token"}
			set.tokens = append(set.tokens, tc)
		case c.ClientCert.CN != "":
			set.cns[c.ClientCert.CN] = Identity{Name: c.Name, Role: c.Role, Via: "cert"}
		default:
			set.sans[strings.ToLower(c.ClientCert.SAN)] = Identity{Name: c.Name, Role: c.Role, Via: "cert"}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checked = time.Now()
	if statErr == nil {
		a.mod, a.size = st.ModTime(), st.Size()
	}
	if err != nil {
		a.err = err
		a.cfg.Logger.Error("credentials not reloaded: the identities loaded before stay", "file", a.cfg.CredentialsFile, "err", err)
		return err
	}
	if a.set.cns != nil {
		a.cfg.Logger.Info("credentials reloaded", "file", a.cfg.CredentialsFile, "identities", len(creds))
	}
	a.set, a.err = set, nil
	return nil
}

// Err reports why the last reload failed (nil when it worked).
func (a *Authenticator) Err() error {
	if a == nil {
		return nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.err
}

// refresh reloads the credentials file when its modification time or size
// changed, looking at most every CheckEvery.
func (a *Authenticator) refresh() {
	if a.cfg.CredentialsFile == "" {
		return
	}
	now := time.Now()
	a.mu.RLock()
	due := now.Sub(a.checked) >= a.cfg.CheckEvery
	mod, size := a.mod, a.size
	a.mu.RUnlock()
	if !due {
		return
	}
	st, err := os.Stat(a.cfg.CredentialsFile)
	if err == nil && st.ModTime().Equal(mod) && st.Size() == size {
		a.mu.Lock()
		a.checked = now
		a.mu.Unlock()
		return
	}
	_ = a.Reload() // logged; a vanished file keeps the identities loaded before
}

// Anonymous is the identity of a request on a server that requires no
// credential.
var Anonymous = Identity{Role: RoleAgent, Via: "none"}

// Authenticate returns who r is: the identity its verified client
// certificate (subject CN or a SAN) or its bearer token names, or, on a
// server that requires no credential, [Anonymous]. A valid legacy operator
// token (the Mhp-Operator header) raises that identity's role to operator
// for this request, keeping its name (so it is still the owner of its
// sessions); presented alone it is the identity [LegacyOperator].
// Otherwise Authenticate returns an *mhp.Error (-32000, data.reason
// "unauthorized") saying what was missing.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	if a == nil {
		return Anonymous, nil
	}
	id, err := a.base(r)
	if h := r.Header.Get(mhp.HeaderOperator); h != "" && a.cfg.OperatorToken != "" {
		sum := sha256.Sum256([]byte(h))
		if subtle.ConstantTimeCompare(sum[:], a.opToken[:]) == 1 {
			if err != nil {
				return Identity{Name: LegacyOperator, Role: RoleOperator, Via: "token"}, nil
			}
			id.Role = RoleOperator
		}
	}
	return id, err
}

// base is the identity of the certificate or bearer token.
func (a *Authenticator) base(r *http.Request) (Identity, error) {
	a.refresh()
	a.mu.RLock()
	set := a.set
	a.mu.RUnlock()
	var leaf *x509.Certificate
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		leaf = r.TLS.VerifiedChains[0][0]
		if id, ok := set.byCert(leaf); ok {
			return id, nil
		}
	}
	presented, hasBearer := Bearer(r)
	if hasBearer {
		sum := sha256.Sum256([]byte(presented))
		found, id := 0, Identity{}
		for _, tc := range set.tokens { // every hash compared: no early exit
			if subtle.ConstantTimeCompare(sum[:], tc.sum[:]) == 1 {
				found, id = 1, tc.id
			}
		}
		if a.cfg.Token != "" && subtle.ConstantTimeCompare(sum[:], a.legacy[:]) == 1 {
			found, id = 1, Identity{Name: LegacyAgent, Role: RoleAgent, Via: "token"}
		}
		if found == 1 {
			return id, nil
		}
	}
	if leaf != nil && a.cfg.CredentialsFile == "" {
		return Identity{Name: leaf.Subject.CommonName, Role: RoleAgent, Via: "cert"}, nil
	}
	if !a.Required() {
		return Anonymous, nil
	}
	switch {
	case hasBearer:
		return Identity{}, unauthorized("the bearer token names no identity (revoked, or mistyped)")
	case leaf != nil:
		return Identity{}, unauthorized(fmt.Sprintf("the client certificate %q is verified but names no identity in the credentials file", leaf.Subject.CommonName))
	}
	return Identity{}, unauthorized("a valid bearer token (Authorization: Bearer) or client certificate is required")
}

func unauthorized(why string) *mhp.Error {
	return mhp.Errorf(mhp.CodeServerError, "unauthorized: %s", why).With(mhp.DataReason, ReasonUnauthorized)
}

// byCert finds the identity a verified leaf certificate signs in as: by its
// subject CN, else by any SAN (DNS names, e-mail addresses, URIs, IPs).
func (s credSet) byCert(leaf *x509.Certificate) (Identity, bool) {
	if id, ok := s.cns[leaf.Subject.CommonName]; ok && leaf.Subject.CommonName != "" {
		return id, true
	}
	if len(s.sans) == 0 {
		return Identity{}, false
	}
	var names []string
	names = append(names, leaf.DNSNames...)
	names = append(names, leaf.EmailAddresses...)
	for _, u := range leaf.URIs {
		names = append(names, u.String())
	}
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	for _, n := range names {
		if id, ok := s.sans[strings.ToLower(n)]; ok {
			return id, true
		}
	}
	return Identity{}, false
}

// Bearer returns the token of an "Authorization: Bearer <token>" header
// (the scheme in any case, RFC 9110 §11.1) and whether there was one.
func Bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		if t := strings.TrimSpace(h[len(p):]); t != "" {
			return t, true
		}
	}
	return "", false
}
