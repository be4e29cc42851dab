// Package oauth2 checks the OAuth2 access tokens of SBI requests as TS
// 33.501 (13.4.1) has NF service producers do: the consumer sends the
// token from the NRF as "Authorization: Bearer <JWT>"; the producer
// verifies its signature with the NRF's public keys, its validity (exp,
// nbf when present), its audience when one is configured, and that its
// scope names the service (Nchf_ConvergedCharging:
// "nchf-convergedcharging").
//
// Keys come from a file: PEM public keys (or certificates) or a JWKS
// document; RS256/384/512, PS256 and ES256/384 are accepted. Tokens that
// passed are remembered until their exp (at most CacheTTL), so a consumer
// reusing its token costs one map lookup per request, not a signature
// check. What it does not do: fetch keys from the NRF, or check the
// token's consumer identity against the TLS peer.
//
// Keys loaded from a file (LoadFile) are reloaded without a restart, as
// chassis/tlsconfig reloads certificates: when the file's modification
// time or size changes (checked at most once per CheckInterval, on the
// request path) and on SIGHUP (ReloadOnSIGHUP). A reload swaps the key set
// atomically and forgets every remembered token, so a token signed by a
// withdrawn key is refused from then on; a file that fails to load keeps
// the previous keys (and says so in the log).
package oauth2

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chf-testbed/testbed/chassis/sighup"
	"github.com/chf-testbed/testbed/internal/readfile"
)

// Scope of Nchf_ConvergedCharging (TS 32.291).
const ScopeConvergedCharging = "nchf-convergedcharging"

// CacheTTL bounds how long a verified token is remembered; CacheSize is
// the most tokens remembered (the cache is emptied when full).
const (
	CacheTTL  = time.Minute
	CacheSize = 1 << 14
)

var (
	// ErrMissing: no bearer token (401).
	ErrMissing = errors.New("oauth2: no bearer access token")
	// ErrInvalid: bad signature, expired, not yet valid, wrong audience,
	// malformed (401).
	ErrInvalid = errors.New("oauth2: invalid access token")
	// ErrScope: valid, but its scope lacks the service (403).
	ErrScope = errors.New("oauth2: access token scope does not grant this service")
)

// Options configure a Verifier.
type Options struct {
	// Scope the token's scope must contain (default
	// ScopeConvergedCharging).
	Scope string
	// Audience, when set, must be in the token's aud.
	Audience string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// CheckInterval is the least time between two checks of the key file's
// modification time and size.
const CheckInterval = time.Second

// Verifier checks bearer tokens. It is safe for concurrent use.
type Verifier struct {
	keys   atomic.Pointer[keySet]
	opts   Options
	parser *jwt.Parser

	mu    sync.RWMutex
	cache map[string]int64 // token → Unix ns until which it is good

	// The key file (LoadFile), re-read when it changes.
	path     string
	log      *slog.Logger
	checked  atomic.Int64 // Unix ns of the last stat
	reloadMu sync.Mutex   // serialises reloads
	reloads  atomic.Uint64
}

// keySet is one loaded set of keys, by kid ("" for keys without), with
// the stamp of the file it came from.
type keySet struct {
	keys  map[string]crypto.PublicKey
	stamp stamp
}

type stamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{size: -1}
	}
	return stamp{fi.ModTime(), fi.Size()}
}

func loadKeys(path string) (*keySet, error) {
	st := stampOf(path)
	b, err := readfile.Read(path, 4<<20)
	if err != nil {
		return nil, fmt.Errorf("cannot read OAuth2 keys: %w", err)
	}
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("cannot load OAuth2 keys from %s: %w", path, err)
	}
	return &keySet{keys: keys, stamp: st}, nil
}

// LoadFile reads the keys of path (PEM or JWKS) into a Verifier that
// reloads them when the file changes.
func LoadFile(path string, opts Options) (*Verifier, error) {
	ks, err := loadKeys(path)
	if err != nil {
		return nil, err
	}
	v := New(ks.keys, opts)
	v.keys.Store(ks)
	v.path = path
	v.checked.Store(time.Now().UnixNano())
	return v, nil
}

// SetLogger sets where reload messages go (default slog.Default()). Call
// it before the Verifier is used.
func (v *Verifier) SetLogger(log *slog.Logger) {
	if log != nil {
		v.log = log
	}
}

// Reloads is the number of times the key file was loaded again.
func (v *Verifier) Reloads() uint64 { return v.reloads.Load() }

// Reload re-reads the key file now (no-op for a Verifier made by New). On
// error the previous keys stay in use.
func (v *Verifier) Reload() error {
	if v.path == "" {
		return nil
	}
	v.reloadMu.Lock()
	defer v.reloadMu.Unlock()
	ks, err := loadKeys(v.path)
	if err != nil {
		v.log.Warn("OAuth2 keys not reloaded, keeping the previous ones", "err", err)
		return err
	}
	v.keys.Store(ks)
	v.mu.Lock()
	clear(v.cache) // tokens are checked again against the new keys
	v.mu.Unlock()
	v.reloads.Add(1)
	v.log.Info("OAuth2 keys reloaded", "file", v.path, "keys", len(ks.keys))
	return nil
}

// maybeReload reloads the key file when it changed since the last check
// (checked at most once per CheckInterval).
func (v *Verifier) maybeReload(now int64) {
	if v.path == "" {
		return
	}
	last := v.checked.Load()
	if now-last < int64(CheckInterval) || !v.checked.CompareAndSwap(last, now) {
		return
	}
	if stampOf(v.path) != v.keys.Load().stamp {
		v.Reload()
	}
}

// ReloadOnSIGHUP re-reads the key file whenever the process gets SIGHUP,
// in addition to the modification time checks, until stop is called.
func (v *Verifier) ReloadOnSIGHUP() (stop func()) { return sighup.OnSIGHUP(v.Reload) }

// New returns a Verifier with keys by key ID ("" for a key that any kid
// may use).
func New(keys map[string]crypto.PublicKey, opts Options) *Verifier {
	if opts.Scope == "" {
		opts.Scope = ScopeConvergedCharging
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	po := []jwt.ParserOption{
		jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "ES256", "ES384"}),
		jwt.WithTimeFunc(opts.Now),
		jwt.WithLeeway(5 * time.Second),
	}
	if opts.Audience != "" {
		po = append(po, jwt.WithAudience(opts.Audience))
	}
	v := &Verifier{opts: opts, parser: jwt.NewParser(po...), cache: map[string]int64{}, log: slog.Default()}
	v.keys.Store(&keySet{keys: keys})
	return v
}

// Check verifies the Authorization header value authz. The error wraps
// ErrMissing, ErrInvalid or ErrScope.
func (v *Verifier) Check(authz []byte) error {
	const prefix = "bearer "
	if len(authz) <= len(prefix) || !strings.EqualFold(string(authz[:len(prefix)]), prefix) {
		return ErrMissing
	}
	tok := authz[len(prefix):]
	v.maybeReload(time.Now().UnixNano())
	now := v.opts.Now().UnixNano()
	v.mu.RLock()
	until, ok := v.cache[string(tok)]
	v.mu.RUnlock()
	if ok && now < until {
		return nil
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(string(tok), claims, v.key); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !hasScope(claims["scope"], v.opts.Scope) {
		return fmt.Errorf("%w: want %q", ErrScope, v.opts.Scope)
	}
	until = now + int64(CacheTTL)
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil && exp.UnixNano() < until {
		until = exp.UnixNano()
	}
	v.mu.Lock()
	if len(v.cache) >= CacheSize {
		clear(v.cache)
	}
	v.cache[string(tok)] = until
	v.mu.Unlock()
	return nil
}

func (v *Verifier) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	keys := v.keys.Load().keys
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	if k, ok := keys[""]; ok {
		return k, nil
	}
	if kid == "" && len(keys) == 1 {
		for _, k := range keys {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no key with kid %q", kid)
}

// hasScope reports whether scope (a space-separated string, or a list)
// contains want.
func hasScope(scope any, want string) bool {
	switch s := scope.(type) {
	case string:
		for _, f := range strings.Fields(s) {
			if f == want {
				return true
			}
		}
	case []any:
		for _, f := range s {
			if f == want {
				return true
			}
		}
	}
	return false
}

// ParseKeys reads PEM public keys / certificates (key IDs from a
// "kid: NAME" PEM header, else "") or a JWKS document.
func ParseKeys(b []byte) (map[string]crypto.PublicKey, error) {
	keys := map[string]crypto.PublicKey{}
	if t := strings.TrimSpace(string(b)); strings.HasPrefix(t, "{") {
		return parseJWKS(b)
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		var k crypto.PublicKey
		switch blk.Type {
		case "PUBLIC KEY":
			pk, err := x509.ParsePKIXPublicKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("cannot parse public key: %w", err)
			}
			k = pk
		case "RSA PUBLIC KEY":
			pk, err := x509.ParsePKCS1PublicKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("cannot parse RSA public key: %w", err)
			}
			k = pk
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("cannot parse certificate: %w", err)
			}
			k = c.PublicKey
		default:
			continue
		}
		switch k.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey:
		default:
			return nil, fmt.Errorf("cannot use a %T key: want RSA or ECDSA", k)
		}
		keys[blk.Headers["kid"]] = k
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key or certificate found")
	}
	return keys, nil
}

func parseJWKS(b []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Use, Crv, N, E, X, Y string
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("cannot parse JWKS: %w", err)
	}
	keys := map[string]crypto.PublicKey{}
	dec := base64.RawURLEncoding
	num := func(s string) (*big.Int, error) {
		v, err := dec.DecodeString(strings.TrimRight(s, "="))
		if err != nil || len(v) == 0 {
			return nil, fmt.Errorf("bad base64url number %q", s)
		}
		return new(big.Int).SetBytes(v), nil
	}
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err := num(k.N)
			if err != nil {
				return nil, fmt.Errorf("cannot use JWKS key %d: %w", i, err)
			}
			e, err := num(k.E)
			if err != nil || !e.IsInt64() {
				return nil, fmt.Errorf("cannot use JWKS key %d: bad e", i)
			}
			keys[k.Kid] = &rsa.PublicKey{N: n, E: int(e.Int64())}
		case "EC":
			var c elliptic.Curve
			switch k.Crv {
			case "P-256":
				c = elliptic.P256()
			case "P-384":
				c = elliptic.P384()
			default:
				return nil, fmt.Errorf("cannot use JWKS key %d: curve %q", i, k.Crv)
			}
			x, err := num(k.X)
			if err != nil {
				return nil, fmt.Errorf("cannot use JWKS key %d: %w", i, err)
			}
			y, err := num(k.Y)
			if err != nil {
				return nil, fmt.Errorf("cannot use JWKS key %d: %w", i, err)
			}
			keys[k.Kid] = &ecdsa.PublicKey{Curve: c, X: x, Y: y}
		default:
			return nil, fmt.Errorf("cannot use JWKS key %d: kty %q (want RSA or EC)", i, k.Kty)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no signing key in JWKS")
	}
	return keys, nil
}
