package api

import (
	"context"
	"crypto/tls"
	"fmt"
)

// Config is what the server's configuration says of the API
// (config.APIConfig.Options builds it).
type Config struct {
	// Listen is host:port ("" = no API).
	Listen string
	TLS    TLSFiles
	// TokenFile holds the API tokens' hashes ("" = no API tokens).
	TokenFile string
	// OIDC verifies JWTs (nil = off).
	OIDC *OIDCConfig
	// Admins are users who are admins whatever their credential says;
	// AdminGroup is the OIDC group or certificate OU that makes one.
	Admins     []string
	AdminGroup string
}

// Setup builds the server c describes on top of o (whose Tokens,
// ClientCert and Admins it sets) and the listener's TLS config (nil for
// plain HTTP). ctx bounds the OIDC key fetches.
func Setup(ctx context.Context, c Config, o Options) (*Server, *tls.Config, error) {
	tlsConfig, err := c.TLS.Config()
	if err != nil {
		return nil, nil, fmt.Errorf("api: %w", err)
	}
	o.Tokens, o.Admins = nil, c.Admins
	if c.TokenFile != "" {
		tf, err := OpenTokenFile(c.TokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("api: %w", err)
		}
		o.Tokens = append(o.Tokens, tf)
	}
	if c.OIDC != nil {
		oc := *c.OIDC
		oc.AdminGroup = c.AdminGroup
		v, err := NewOIDC(ctx, oc)
		if err != nil {
			return nil, nil, fmt.Errorf("api: %w", err)
		}
		o.Tokens = append(o.Tokens, v)
	}
	if c.TLS.ClientCA != "" {
		o.ClientCert = &ClientCert{AdminGroup: c.AdminGroup}
	}
	s, err := New(o)
	if err != nil {
		return nil, nil, err
	}
	return s, tlsConfig, nil
}
