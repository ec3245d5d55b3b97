package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/gangwayhq/gangway"
)

// OIDCConfig says whose JWTs to trust and how to read them.
type OIDCConfig struct {
	// Issuer is the tokens' iss; Audience their aud (the client ID
	// Gangway is registered as).
	Issuer   string
	Audience string
	// JWKSURL is where the issuer publishes its signing keys.
	JWKSURL string
	// UserClaim names the user ("sub" if empty; "email" is common);
	// TeamsClaim holds the teams: a list of strings, or one string of
	// names separated by spaces or commas ("groups" if empty).
	UserClaim  string
	TeamsClaim string
	// AdminGroup, when one of the teams claim's values, makes an admin.
	AdminGroup string
	// HTTP fetches the keys (nil: http.DefaultClient).
	HTTP *http.Client
}

// OIDC verifies JWTs (OIDC ID tokens, or access tokens in JWT form): the
// signature against the issuer's JWKS (fetched when a token names a key
// not yet seen, so keys rotate), the issuer, the audience and the expiry.
type OIDC struct {
	c OIDCConfig
	v *oidc.IDTokenVerifier
}

// NewOIDC returns a verifier; ctx bounds its key fetches (the server's
// lifetime, not a request's).
func NewOIDC(ctx context.Context, c OIDCConfig) (*OIDC, error) {
	if c.Issuer == "" || c.Audience == "" || c.JWKSURL == "" {
		return nil, errors.New("oidc: issuer, audience and jwksURL are required")
	}
	if c.UserClaim == "" {
		c.UserClaim = "sub"
	}
	if c.TeamsClaim == "" {
		c.TeamsClaim = "groups"
	}
	if c.HTTP != nil {
		ctx = oidc.ClientContext(ctx, c.HTTP)
	}
	keys := oidc.NewRemoteKeySet(ctx, c.JWKSURL)
	v := oidc.NewVerifier(c.Issuer, keys, &oidc.Config{ClientID: c.Audience,
		SupportedSigningAlgs: []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.EdDSA}})
	return &OIDC{c: c, v: v}, nil
}

// Verify checks a JWT and reads the identity from its claims. Groups that
// are not team names (DNS labels) are not teams; the admin group makes an
// admin.
func (o *OIDC) Verify(ctx context.Context, token string) (Identity, error) {
	if strings.Count(token, ".") != 2 {
		return Identity{}, ErrNotMine
	}
	t, err := o.v.Verify(ctx, token)
	if err != nil {
		return Identity{}, err // go-oidc's errors start "oidc: "
	}
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("oidc: claims: %w", err)
	}
	user, _ := claims[o.c.UserClaim].(string)
	if user == "" {
		return Identity{}, fmt.Errorf("oidc: the token has no %q claim to name the user", o.c.UserClaim)
	}
	id := Identity{User: user, Via: "oidc"}
	for _, g := range claimValues(claims[o.c.TeamsClaim]) {
		switch {
		case o.c.AdminGroup != "" && g == o.c.AdminGroup:
			id.Admin = true
		case gangway.IsDNSLabel(g):
			id.Teams = append(id.Teams, g)
		}
	}
	return id, nil
}

// claimValues reads a list claim: ["a", "b"], or "a b" / "a,b".
func claimValues(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
