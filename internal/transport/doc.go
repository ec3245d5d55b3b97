// Package transport turns the connection settings of the config (Temporal
// and Redis addresses, TLS files, API keys, ACL users) into the options of
// the Temporal and go-redis clients, so every command and test dials the
// same way: TLS 1.2 or later, the server checked against the configured CA
// (or the system roots) and name, a client certificate for mutual TLS, and
// for Temporal an API key sent as a bearer token. It reads the files it is
// named and dials nothing; the errors it returns never carry a password.
package transport
