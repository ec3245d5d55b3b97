package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/redact"
)

// APIConfig is the user API `gangway server` serves (internal/api): where,
// over what, and whom it believes. docs/api.md says how to set it up.
type APIConfig struct {
	// Listen is the API's host:port ("" = no API).
	Listen string `yaml:"listen"`
	// TLSCert and TLSKey serve HTTPS (both or neither); ClientCA, with
	// them, verifies client certificates (CN = user, OU = teams).
	TLSCert  string `yaml:"tlsCert"`
	TLSKey   string `yaml:"tlsKey"`
	ClientCA string `yaml:"clientCA"`
	// TokenFile holds the API tokens' hashes (`gangway token create`
	// appends to it); "" = no API tokens.
	TokenFile string `yaml:"tokenFile"`
	// OIDC verifies JWTs from an identity provider (issuer "" = off).
	OIDC OIDCConfig `yaml:"oidc"`
	// Admins are users who are admins whatever their credential says.
	Admins []string `yaml:"admins"`
	// AdminGroup is the OIDC group or certificate OU that makes an admin.
	AdminGroup string `yaml:"adminGroup"`
}

// OIDCConfig says whose JWTs the API trusts.
type OIDCConfig struct {
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	JWKSURL  string `yaml:"jwksURL"`
	// UserClaim names the user (default sub); TeamsClaim lists the teams
	// (default groups).
	UserClaim  string `yaml:"userClaim"`
	TeamsClaim string `yaml:"teamsClaim"`
}

// Enabled reports whether the config turns OIDC on.
func (o OIDCConfig) Enabled() bool { return o.Issuer != "" }

func defaultAPIConfig() APIConfig {
	return APIConfig{Listen: ":8080", TokenFile: "/var/lib/gangway-server/tokens",
		OIDC: OIDCConfig{UserClaim: "sub", TeamsClaim: "groups"}}
}

// validate names every bad field of the api section.
func (a APIConfig) validate(bad func(field, format string, args ...any)) {
	if a.Listen == "" {
		return
	}
	if _, _, err := net.SplitHostPort(a.Listen); err != nil {
		bad("api.listen", "want host:port (or empty for no API), got %q", a.Listen)
	}
	if (a.TLSCert == "") != (a.TLSKey == "") {
		bad("api.tlsKey", "api.tlsCert and api.tlsKey go together: set both or neither")
	}
	if a.ClientCA != "" && a.TLSCert == "" {
		bad("api.clientCA", "client certificates need TLS: set api.tlsCert and api.tlsKey")
	}
	if a.TokenFile == "" && !a.OIDC.Enabled() && a.ClientCA == "" {
		bad("api", "no way to authenticate users: set api.tokenFile, api.oidc.issuer or api.clientCA")
	}
	if o := a.OIDC; o.Enabled() {
		for _, f := range []struct{ field, v string }{{"api.oidc.issuer", o.Issuer}, {"api.oidc.jwksURL", o.JWKSURL}} {
			if u, err := url.Parse(f.v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				bad(f.field, "want an http(s) URL, got %q", redact.URL(f.v))
			}
		}
		if o.Audience == "" {
			bad("api.oidc.audience", "must not be empty when api.oidc.issuer is set")
		}
		if o.UserClaim == "" {
			bad("api.oidc.userClaim", "must not be empty")
		}
		if o.TeamsClaim == "" {
			bad("api.oidc.teamsClaim", "must not be empty")
		}
	}
	for i, u := range a.Admins {
		if u == "" || strings.ContainsAny(u, " \t\n") {
			bad(fmt.Sprintf("api.admins[%d]", i), "want a user name, got %q", u)
		}
	}
}

// Options is the section as the API package takes it.
func (a APIConfig) Options() api.Config {
	c := api.Config{Listen: a.Listen, TLS: api.TLSFiles{Cert: a.TLSCert, Key: a.TLSKey, ClientCA: a.ClientCA},
		TokenFile: a.TokenFile, Admins: a.Admins, AdminGroup: a.AdminGroup}
	if o := a.OIDC; o.Enabled() {
		c.OIDC = &api.OIDCConfig{Issuer: o.Issuer, Audience: o.Audience, JWKSURL: o.JWKSURL,
			UserClaim: o.UserClaim, TeamsClaim: o.TeamsClaim}
	}
	return c
}
