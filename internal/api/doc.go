// Package api is Gangway's user API: what `gangway server` serves over
// HTTP/JSON to the CLI, the Go client (client.NewAPI) and the web view —
// submit, status, why, list, cancel, logs (followed as a stream), cost and
// nodes, and cordon, uncordon and drain for admins. openapi.yaml documents
// every route; a test keeps it and the router in step.
//
// Every request but the spec and the health check is authenticated
// (Authenticator): a bearer token from the token file (TokenFile, stored as
// SHA-256 hashes), an OIDC ID token verified against the issuer's JWKS
// (OIDC), or a verified client certificate (ClientCert). The token is read
// from the Authorization header first, then from the gangway_token cookie
// a browser carries. The identity — a user, its teams and whether it is an
// admin — is in the request's context (IdentityFrom).
//
// Authorization is per team: a user submits only as one of its teams,
// sees, cancels and reads the logs of its teams' jobs only, and reads its
// teams' costs; admins may do everything, and only they change nodes. A
// refusal is a 401 (no or bad credentials) or a 403 (not allowed) whose
// JSON body names what was missing. Every mutating call writes one audit
// line (who, what, which job or node, the outcome), never a credential.
//
// The package reaches jobs through the client package over workflows/jobs
// and the fleet through the Redis view's methods; it imports no Temporal
// or Redis package itself.
package api
