// Package nodeauth decides which agents may join the fleet as which
// nodes. An agent proves itself with a credential the server checks in the
// NodeUpdate activity, the only way an agent changes the inventory in the
// Redis view (its Redis user may only read it: docs/security.md):
//
//   - a join token from the server's token file, which holds each token's
//     SHA-256 and what it may join as: any node of one pool (pool=NAME) or
//     one node (node=ID). The file is read again whenever it changes, so a
//     token is added, rotated or revoked without a restart.
//   - a one-use launch token, which the server signs (HMAC-SHA256 with its
//     join secret) into the boot data of the cloud instances it launches:
//     good for the launch's pool, for as many nodes as instances were
//     launched, until the boot timeout. Whoever reads the boot data later
//     (anything on the instance can query its metadata service) finds a
//     token that is used up or expired.
//   - the node token the server returns on every successful join, signed
//     for that node ID and pool: the agent keeps it in its data directory
//     (0600) and shows it from then on.
//
// A join token of a pool, or a launch token, may register a node ID that is
// not registered or whose agent has been silent longer than the grace;
// taking over a live node needs that node's own credential (its node token,
// or a per-node join token), so no node overwrites another's inventory.
//
// No credential travels: the agent sends a proof, an HMAC of its request
// (the update's workflow ID and content) keyed with the credential, which
// the server recomputes from what it holds (the join tokens' hashes, its
// secrets), so Temporal's history of the update holds no secret and a
// proof found there is good for that one update. The server logs no
// credential and puts none in an error. The token file holds each token's
// SHA-256, which is also the key the token's proofs are checked with: keep
// it as private as the join secret (readable by the server's user only).
package nodeauth
