package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/internal/api"
)

// TestValidateAPI: every bad field of the api section is named by its
// path; an API that could authenticate no one is refused.
func TestValidateAPI(t *testing.T) {
	tests := map[string]struct {
		change   func(*APIConfig)
		wantErrs []string
	}{
		"defaults":                 {change: func(*APIConfig) {}},
		"no API, nothing to check": {change: func(a *APIConfig) { *a = APIConfig{} }},
		"bad listen address": {
			change:   func(a *APIConfig) { a.Listen = "8080" },
			wantErrs: []string{`api.listen: want host:port (or empty for no API), got "8080"`},
		},
		"a certificate without its key": {
			change:   func(a *APIConfig) { a.TLSCert = "/etc/gangway/api.pem" },
			wantErrs: []string{"api.tlsKey: api.tlsCert and api.tlsKey go together: set both or neither"},
		},
		"a client CA without TLS": {
			change:   func(a *APIConfig) { a.ClientCA = "/etc/gangway/ca.pem" },
			wantErrs: []string{"api.clientCA: client certificates need TLS: set api.tlsCert and api.tlsKey"},
		},
		"no way to authenticate": {
			change:   func(a *APIConfig) { a.TokenFile = "" },
			wantErrs: []string{"api: no way to authenticate users: set api.tokenFile, api.oidc.issuer or api.clientCA"},
		},
		"OIDC alone": {
			change: func(a *APIConfig) {
				a.TokenFile, a.OIDC.Issuer, a.OIDC.Audience, a.OIDC.JWKSURL = "", "https://id.example.com", "gangway", "https://id.example.com/keys"
			},
		},
		"OIDC half set": {
			change: func(a *APIConfig) { a.OIDC.Issuer, a.OIDC.TeamsClaim, a.OIDC.JWKSURL = "id.example.com", "", "ftp://x" },
			wantErrs: []string{
				`api.oidc.issuer: want an http(s) URL, got "id.example.com"`,
				`api.oidc.jwksURL: want an http(s) URL, got "ftp://x"`,
				"api.oidc.audience: must not be empty when api.oidc.issuer is set",
				"api.oidc.teamsClaim: must not be empty",
			},
		},
		"a blank admin": {
			change:   func(a *APIConfig) { a.Admins = []string{"alice", "bob smith"} },
			wantErrs: []string{`api.admins[1]: want a user name, got "bob smith"`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Default()
			tc.change(&c.API)
			var got []string
			if err := c.Validate(true, false); err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					got = append(got, e.Error())
				}
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAPIOptions: the section becomes the API package's config; OIDC only
// when an issuer is set.
func TestAPIOptions(t *testing.T) {
	a := defaultAPIConfig()
	a.Admins, a.AdminGroup, a.ClientCA = []string{"root"}, "ops", "ca.pem"
	want := api.Config{Listen: ":8080", TokenFile: "/var/lib/gangway-server/tokens", Admins: []string{"root"}, AdminGroup: "ops",
		TLS: api.TLSFiles{ClientCA: "ca.pem"}}
	if diff := cmp.Diff(want, a.Options()); diff != "" {
		t.Errorf("Options (-want +got):\n%s", diff)
	}
	a.OIDC.Issuer, a.OIDC.Audience, a.OIDC.JWKSURL = "https://id", "gw", "https://id/keys"
	want.OIDC = &api.OIDCConfig{Issuer: "https://id", Audience: "gw", JWKSURL: "https://id/keys", UserClaim: "sub", TeamsClaim: "groups"}
	if diff := cmp.Diff(want, a.Options()); diff != "" {
		t.Errorf("Options with OIDC (-want +got):\n%s", diff)
	}
}
