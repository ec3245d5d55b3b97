package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// CLIConfig is where the job commands (submit, status, cost, ...) find the
// user API and the token they prove who they are with. Flags, with
// environment defaults; no config file: users do not hold the servers'.
type CLIConfig struct {
	// API is the API's base URL.
	API string
	// Token is the token itself (better kept in TokenFile: a flag shows in
	// the process list).
	Token string
	// TokenFile holds the token on its first line; a missing file at the
	// default path is no token.
	TokenFile string
	// CA is a PEM file of the CA to trust for an https API (default: the
	// system's).
	CA string
}

// DefaultAPI is the API a CLI without --api or GANGWAY_API talks to.
const DefaultAPI = "http://127.0.0.1:8080"

// CLIEnvNames are the environment variables BindCLIFlags reads.
var CLIEnvNames = []string{"GANGWAY_API", "GANGWAY_API_CA", "GANGWAY_TOKEN", "GANGWAY_TOKEN_FILE"}

// DefaultTokenFile is where the CLI looks for a token without
// --token-file: $XDG_CONFIG_HOME/gangway/token (~/.config/gangway/token).
func DefaultTokenFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "gangway", "token")
}

// BindCLIFlags adds --api, --token, --token-file and --api-ca to fs, their
// defaults from GANGWAY_API, GANGWAY_TOKEN, GANGWAY_TOKEN_FILE and
// GANGWAY_API_CA.
func BindCLIFlags(fs *pflag.FlagSet, c *CLIConfig) {
	env := func(name, def string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return def
	}
	fs.StringVar(&c.API, "api", env("GANGWAY_API", DefaultAPI), "user API base URL (env GANGWAY_API)")
	fs.StringVar(&c.Token, "token", env("GANGWAY_TOKEN", ""), "API token (env GANGWAY_TOKEN; prefer --token-file)")
	fs.StringVar(&c.TokenFile, "token-file", env("GANGWAY_TOKEN_FILE", DefaultTokenFile()), "file whose first line is the API token (env GANGWAY_TOKEN_FILE)")
	fs.StringVar(&c.CA, "api-ca", env("GANGWAY_API_CA", ""), "PEM CA to trust for an https API (env GANGWAY_API_CA)")
}

// ResolveToken is the token to send: Token, else the token file's first
// line; "" when there is neither (the API will say a token is required).
func (c CLIConfig) ResolveToken() (string, error) {
	if c.Token != "" {
		return c.Token, nil
	}
	if c.TokenFile == "" {
		return "", nil
	}
	data, err := os.ReadFile(c.TokenFile)
	if errors.Is(err, fs.ErrNotExist) && c.TokenFile == DefaultTokenFile() {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(line), nil
}

// TLS is the https client config: the CA file's roots, or nil for the
// system's.
func (c CLIConfig) TLS() (*tls.Config, error) {
	if c.CA == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, fmt.Errorf("--api-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--api-ca %s: no PEM certificate in it", c.CA)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
