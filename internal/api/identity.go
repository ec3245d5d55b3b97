package api

import (
	"context"

	"github.com/gangwayhq/gangway/client"
)

// Identity is who a request comes from, as its credential says: the
// client package's, since GET /v1/whoami sends it.
type Identity = client.Identity

type identityKey struct{}

// WithIdentity returns ctx carrying id, as the server's authentication
// does for every request it lets through.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity the request's context carries; false
// when the request was not authenticated (a public route, or a mount by
// MountPublic without credentials).
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
