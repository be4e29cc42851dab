package oauth2_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chf-testbed/testbed/chassis/oauth2"
)

// Keys are signing keys made at test time.
type keys struct {
	ec  *ecdsa.PrivateKey
	rsa *rsa.PrivateKey
}

func newKeys(t *testing.T) keys {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return keys{ec, rk}
}

// pemFile writes the public keys as PEM, the EC one with kid "ec1".
func (k keys) pemFile(t *testing.T) string {
	t.Helper()
	var out []byte
	for _, kv := range []struct {
		kid string
		pub any
	}{{"ec1", &k.ec.PublicKey}, {"rsa1", &k.rsa.PublicKey}} {
		der, err := x509.MarshalPKIXPublicKey(kv.pub)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Headers: map[string]string{"kid": kv.kid}, Bytes: der})...)
	}
	p := filepath.Join(t.TempDir(), "keys.pem")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (k keys) jwksFile(t *testing.T) string {
	t.Helper()
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	pad := func(n *big.Int) []byte { return n.FillBytes(make([]byte, 32)) }
	doc := map[string]any{"keys": []map[string]string{
		{"kty": "EC", "kid": "ec1", "use": "sig", "crv": "P-256", "x": b64(pad(k.ec.X)), "y": b64(pad(k.ec.Y))},
		{"kty": "RSA", "kid": "rsa1", "n": b64(k.rsa.N.Bytes()), "e": b64(big.NewInt(int64(k.rsa.E)).Bytes())},
	}}
	b, _ := json.Marshal(doc)
	p := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sign(t *testing.T, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheck(t *testing.T) {
	k := newKeys(t)
	other := newKeys(t)
	now := time.Now()
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": "nrf", "sub": "smf-1", "aud": []string{"CHF"}, "scope": "nchf-convergedcharging nchf-spendinglimitcontrol",
			"exp": now.Add(time.Hour).Unix()}
	}
	with := func(key string, v any) jwt.MapClaims {
		c := good()
		if v == nil {
			delete(c, key)
		} else {
			c[key] = v
		}
		return c
	}
	for _, file := range []string{k.pemFile(t), k.jwksFile(t)} {
		v, err := oauth2.LoadFile(file, oauth2.Options{Audience: "CHF"})
		if err != nil {
			t.Fatal(err)
		}
		f := func(name, authz string, want error) {
			t.Helper()
			err := v.Check([]byte(authz))
			if want == nil && err != nil || want != nil && !errors.Is(err, want) {
				t.Errorf("%s (%s): err = %v, want %v", name, filepath.Base(file), err, want)
			}
		}
		es := sign(t, jwt.SigningMethodES256, "ec1", k.ec, good())
		f("ES256", "Bearer "+es, nil)
		f("ES256 again (cached)", "bearer "+es, nil)
		f("RS256", "Bearer "+sign(t, jwt.SigningMethodRS256, "rsa1", k.rsa, good()), nil)
		f("no exp", "Bearer "+sign(t, jwt.SigningMethodES256, "ec1", k.ec, with("exp", nil)), nil)
		f("scope as a list", "Bearer "+sign(t, jwt.SigningMethodES256, "ec1", k.ec, with("scope", []string{"nchf-convergedcharging"})), nil)
		f("missing", "", oauth2.ErrMissing)
		f("basic auth", "Basic dXNlcjpwYXNz", oauth2.ErrMissing)
		f("bad signature", "Bearer "+sign(t, jwt.SigningMethodES256, "ec1", other.ec, good()), oauth2.ErrInvalid)
		f("unknown kid", "Bearer "+sign(t, jwt.SigningMethodES256, "ec9", k.ec, good()), oauth2.ErrInvalid)
		f("expired", "Bearer "+sign(t, jwt.SigningMethodES256, "ec1", k.ec, with("exp", now.Add(-time.Minute).Unix())), oauth2.ErrInvalid)
		f("not yet valid", "Bearer "+sign(t, jwt.SigningMethodES256, "ec1", k.ec, with("nbf", now.Add(time.Hour).Unix())), oauth2.ErrInvalid)
		f("wrong audience", "Bearer "+sign(t, jwt.SigningMethodES256, "ec1", k.ec, with("aud", "PCF")), oauth2.ErrInvalid)
		f("HS256 (symmetric, refused)", "Bearer "+sign(t, jwt.SigningMethodHS256, "ec1", []byte("secret"), good()), oauth2.ErrInvalid)
		f("garbage", "Bearer abc.def.ghi", oauth2.ErrInvalid)
		f("wrong scope", "Bearer "+sign(t, jwt.SigningMethodES256, "ec1", k.ec, with("scope", "npcf-smpolicycontrol")), oauth2.ErrScope)
		f("no scope", "Bearer "+sign(t, jwt.SigningMethodES256, "ec1", k.ec, with("scope", nil)), oauth2.ErrScope)
	}
}

func TestCachedTokenExpires(t *testing.T) {
	k := newKeys(t)
	now := time.Now()
	clock := now
	v := oauth2.New(map[string]crypto.PublicKey{"": &k.ec.PublicKey}, oauth2.Options{Now: func() time.Time { return clock }})
	tok := "Bearer " + sign(t, jwt.SigningMethodES256, "", k.ec, jwt.MapClaims{"scope": "nchf-convergedcharging", "exp": now.Add(10 * time.Second).Unix()})
	if err := v.Check([]byte(tok)); err != nil {
		t.Fatal(err)
	}
	clock = now.Add(30 * time.Second)
	if err := v.Check([]byte(tok)); !errors.Is(err, oauth2.ErrInvalid) {
		t.Fatalf("cached token past its exp: err = %v, want ErrInvalid", err)
	}
}

func TestCheckCachedAllocs(t *testing.T) {
	k := newKeys(t)
	v := oauth2.New(map[string]crypto.PublicKey{"": &k.ec.PublicKey}, oauth2.Options{})
	tok := []byte("Bearer " + sign(t, jwt.SigningMethodES256, "", k.ec, jwt.MapClaims{"scope": "nchf-convergedcharging"}))
	if err := v.Check(tok); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { v.Check(tok) }); n != 0 {
		t.Errorf("Check of a cached token allocates %v times, want 0", n)
	}
}

func TestParseKeysErrors(t *testing.T) {
	for _, in := range []string{"", "not pem", `{"keys":[]}`, `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, `{"keys":[{"kty":"EC","crv":"P-521","x":"AA","y":"AA"}]}`} {
		if _, err := oauth2.ParseKeys([]byte(in)); err == nil {
			t.Errorf("ParseKeys(%q) succeeded", in)
		}
	}
}

// TestKeysReload: the key file is re-read when it changes (mtime/size,
// checked at most once per CheckInterval) and on SIGHUP; a reload forgets
// remembered tokens, so a token of a withdrawn key is refused at once, and
// a file that fails to load keeps the previous keys.
func TestKeysReload(t *testing.T) {
	k1, k2 := newKeys(t), newKeys(t)
	file := k1.pemFile(t)
	v, err := oauth2.LoadFile(file, oauth2.Options{})
	if err != nil {
		t.Fatal(err)
	}
	claims := func() jwt.MapClaims {
		return jwt.MapClaims{"scope": "nchf-convergedcharging", "exp": time.Now().Add(time.Hour).Unix()}
	}
	tok1 := []byte("Bearer " + sign(t, jwt.SigningMethodES256, "ec1", k1.ec, claims()))
	tok2 := []byte("Bearer " + sign(t, jwt.SigningMethodES256, "ec1", k2.ec, claims()))
	check := func(name string, tok []byte, want error) {
		t.Helper()
		if err := v.Check(tok); want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("%s: err = %v, want %v", name, err, want)
		}
	}
	check("first key", tok1, nil)
	check("first key, cached", tok1, nil)
	check("second key before the change", tok2, oauth2.ErrInvalid)

	// Replace the file (same size: PEM keys of the same kind) and date it
	// later; the next check after CheckInterval sees it.
	replace := func(src string, later time.Duration) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(later)
		if err := os.Chtimes(file, at, at); err != nil {
			t.Fatal(err)
		}
	}
	replace(k2.pemFile(t), time.Minute)
	time.Sleep(oauth2.CheckInterval + 100*time.Millisecond)
	check("second key after the change", tok2, nil)
	if v.Reloads() != 1 {
		t.Fatalf("reloads = %d, want 1", v.Reloads())
	}
	check("first key after the change (was cached)", tok1, oauth2.ErrInvalid)

	// A broken file keeps the keys in use.
	if err := os.WriteFile(file, []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := v.Reload(); err == nil {
		t.Fatal("Reload of a broken file succeeded")
	}
	check("second key with a broken file", tok2, nil)

	// SIGHUP reloads at once.
	stop := v.ReloadOnSIGHUP()
	defer stop()
	replace(k1.pemFile(t), 2*time.Minute)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for v.Reloads() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if v.Reloads() < 2 {
		t.Fatalf("no reload after SIGHUP: reloads = %d", v.Reloads())
	}
	check("first key after SIGHUP", tok1, nil)
	check("second key after SIGHUP", tok2, oauth2.ErrInvalid)
}
