package api

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway/client"
)

// TokenCookie is the cookie a browser carries the token in (the web
// view's login form sets it, HttpOnly). The Authorization header wins
// when a request has both.
const TokenCookie = "gangway_token"

// ErrNotMine is what a TokenVerifier returns for a token that is not of
// its kind (an OIDC verifier given an API token): the next verifier may
// take it.
var ErrNotMine = errors.New("not this verifier's kind of token")

// TokenVerifier checks a bearer token and returns the identity it
// proves: ErrNotMine when the token is not of its kind, another error
// (saying why, never quoting the token) when it is and is not valid.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (Identity, error)
}

// authenticator is the server's chain: the bearer token (header, then
// cookie) through each verifier in turn; without a token, the verified
// client certificate.
type authenticator struct {
	tokens []TokenVerifier
	certs  *ClientCert
	admins []string
}

// authError is a 401: the request proves no identity.
type authError struct{ msg string }

func (e authError) Error() string { return e.msg }

// authenticate returns who r comes from; an authError says why it proves
// no one.
func (a authenticator) authenticate(r *http.Request) (Identity, error) {
	token, err := bearer(r)
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	switch {
	case token != "":
		if id, err = a.verify(r.Context(), token); err != nil {
			return Identity{}, err
		}
	case a.certs != nil && r.TLS != nil && len(r.TLS.VerifiedChains) > 0:
		if id, err = a.certs.Identity(r.TLS.VerifiedChains[0][0]); err != nil {
			return Identity{}, authError{"client certificate: " + err.Error()}
		}
	default:
		return Identity{}, authError{"token required: send Authorization: Bearer TOKEN"}
	}
	if slices.Contains(a.admins, id.User) {
		id.Admin = true
	}
	slices.Sort(id.Teams)
	id.Teams = slices.Compact(id.Teams)
	return id, nil
}

func (a authenticator) verify(ctx context.Context, token string) (Identity, error) {
	for _, v := range a.tokens {
		id, err := v.Verify(ctx, token)
		switch {
		case err == nil:
			return id, nil
		case !errors.Is(err, ErrNotMine):
			return Identity{}, authError{"invalid token: " + err.Error()}
		}
	}
	return Identity{}, authError{"invalid token: no configured verifier knows it"}
}

// bearer returns the request's token: the Authorization header's bearer
// token, else the gangway_token cookie's value; "" when it has neither.
func bearer(r *http.Request) (string, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return "", authError{"Authorization header: want \"Bearer TOKEN\""}
		}
		return strings.TrimSpace(token), nil
	}
	if c, err := r.Cookie(TokenCookie); err == nil && c.Value != "" {
		return c.Value, nil
	}
	return "", nil
}

// ClientCert turns a verified client certificate into an identity: the
// subject's common name is the user, its organizational units are the
// teams, and an OU equal to AdminGroup makes an admin. The TLS listener
// verifies the chain against the configured CA; only verified
// certificates reach it.
type ClientCert struct {
	AdminGroup string
}

// Identity maps the certificate's subject.
func (c ClientCert) Identity(cert *x509.Certificate) (Identity, error) {
	user := cert.Subject.CommonName
	if user == "" {
		return Identity{}, errors.New("the subject has no common name (CN) to name the user")
	}
	id := Identity{User: user, Via: "cert"}
	for _, ou := range cert.Subject.OrganizationalUnit {
		if c.AdminGroup != "" && ou == c.AdminGroup {
			id.Admin = true
			continue
		}
		id.Teams = append(id.Teams, ou)
	}
	return id, nil
}

// forbidden is a 403 naming the team the identity is not in; more says
// what it was for.
func forbidden(id Identity, team, more string) error {
	return &client.APIError{Status: http.StatusForbidden, Code: client.CodeForbidden,
		Message: fmt.Sprintf("user %s is not in team %s%s", id.User, team, more)}
}

// needAdmin is a 403 for what only admins may do.
func needAdmin(id Identity, what string) error {
	return &client.APIError{Status: http.StatusForbidden, Code: client.CodeForbidden,
		Message: fmt.Sprintf("user %s is not an admin: %s needs one", id.User, what)}
}
