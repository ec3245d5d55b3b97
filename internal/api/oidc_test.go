package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
)

// issuer is a local identity provider: a JWKS served by httptest with
// keys the test made, and a way to sign tokens.
type issuer struct {
	srv     *httptest.Server
	keys    []jose.JSONWebKey // private, by kid
	fetches atomic.Int32
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.keys = []jose.JSONWebKey{{Key: rsaKey, KeyID: "rsa-1", Algorithm: "RS256", Use: "sig"},
		{Key: ecKey, KeyID: "ec-1", Algorithm: "ES256", Use: "sig"}}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		var set jose.JSONWebKeySet
		for _, k := range is.keys {
			set.Keys = append(set.Keys, k.Public())
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// sign makes a JWT of claims with the key kid (one not served: any other
// RSA key under that kid).
func (is *issuer) sign(t *testing.T, kid string, claims map[string]any) string {
	t.Helper()
	var key jose.JSONWebKey
	for _, k := range is.keys {
		if k.KeyID == kid {
			key = k
		}
	}
	if key.Key == nil {
		stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
		key = jose.JSONWebKey{Key: stranger, KeyID: "rsa-1", Algorithm: "RS256"}
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: key},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOIDC verifies tokens against a local JWKS: signature, issuer,
// audience, expiry, the user and teams claims and the admin group.
func TestOIDC(t *testing.T) {
	is := newIssuer(t)
	const iss, aud = "https://id.example.com", "gangway"
	v, err := NewOIDC(context.Background(), OIDCConfig{Issuer: iss, Audience: aud, JWKSURL: is.srv.URL,
		UserClaim: "email", TeamsClaim: "groups", AdminGroup: "gangway-admins"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func(change func(map[string]any)) map[string]any {
		c := map[string]any{"iss": iss, "aud": aud, "sub": "u-123", "email": "alice@example.com",
			"groups": []string{"ml", "Some Group", "vision"}, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
		if change != nil {
			change(c)
		}
		return c
	}
	tests := map[string]struct {
		kid     string
		claims  map[string]any
		want    Identity
		wantErr string
	}{
		"rsa":            {kid: "rsa-1", claims: claims(nil), want: Identity{User: "alice@example.com", Teams: []string{"ml", "vision"}, Via: "oidc"}},
		"ec":             {kid: "ec-1", claims: claims(nil), want: Identity{User: "alice@example.com", Teams: []string{"ml", "vision"}, Via: "oidc"}},
		"admin group":    {kid: "rsa-1", claims: claims(func(c map[string]any) { c["groups"] = "ml gangway-admins" }), want: Identity{User: "alice@example.com", Teams: []string{"ml"}, Admin: true, Via: "oidc"}},
		"audience list":  {kid: "rsa-1", claims: claims(func(c map[string]any) { c["aud"] = []string{"other", aud} }), want: Identity{User: "alice@example.com", Teams: []string{"ml", "vision"}, Via: "oidc"}},
		"wrong audience": {kid: "rsa-1", claims: claims(func(c map[string]any) { c["aud"] = "other" }), wantErr: "audience"},
		"wrong issuer":   {kid: "rsa-1", claims: claims(func(c map[string]any) { c["iss"] = "https://evil.example.com" }), wantErr: "issued by a different provider"},
		"expired":        {kid: "rsa-1", claims: claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() }), wantErr: "expired"},
		"an unknown key": {kid: "stranger", claims: claims(nil), wantErr: "signature"},
		"no user claim":  {kid: "rsa-1", claims: claims(func(c map[string]any) { delete(c, "email") }), wantErr: `"email" claim`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), is.sign(t, tc.kid, tc.claims))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Verify = %+v, %v; want an error with %q", id, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, id); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := v.Verify(context.Background(), "gw_abc"); err != ErrNotMine {
		t.Errorf("an API token: %v, want ErrNotMine", err)
	}

	// Through the server, after the token file: a JWT is taken by OIDC.
	ts := newTestServer(t)
	ts.srv.auth.tokens = append(ts.srv.auth.tokens, v)
	req, _ := http.NewRequest("GET", ts.http.URL+"/v1/jobs/vision-train", nil)
	req.Header.Set("Authorization", "Bearer "+is.sign(t, "rsa-1", claims(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a vision member's JWT reading a vision job: %d", resp.StatusCode)
	}
}

// TestClientCert maps a certificate's subject: CN the user, OUs the teams.
func TestClientCert(t *testing.T) {
	c := ClientCert{AdminGroup: "ops"}
	id, err := c.Identity(&x509.Certificate{Subject: pkix.Name{CommonName: "carol", OrganizationalUnit: []string{"ml", "ops"}}})
	if want := (Identity{User: "carol", Teams: []string{"ml"}, Admin: true, Via: "cert"}); err != nil || !cmp.Equal(id, want) {
		t.Errorf("Identity = %+v, %v; want %+v", id, err, want)
	}
	if _, err := c.Identity(&x509.Certificate{}); err == nil || !strings.Contains(err.Error(), "common name") {
		t.Errorf("no CN: %v", err)
	}
}
