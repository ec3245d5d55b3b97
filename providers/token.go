package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/google/uuid"
)

// Token is the idempotency token of one attempt of one job: "gw-" and 32
// hex digits, a DNS label short enough for an EC2 ClientToken (64), a GCE
// instance name prefix and a GCP label value (63). It is a pure function of
// its arguments, so a workflow computes it deterministically and every
// retry of the launch activity passes the same one.
func Token(jobID string, attempt int) string {
	sum := sha256.Sum256([]byte(jobID + "/" + strconv.Itoa(attempt)))
	return "gw-" + hex.EncodeToString(sum[:16])
}

// namespace is the UUID namespace of Gangway's request IDs.
var namespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/gangwayhq/gangway/providers"))

// RequestUUID is a name-based (version 5) UUID of one attempt of one job,
// for APIs whose idempotency key must be a UUID (GCE's requestId).
func RequestUUID(jobID string, attempt int) string {
	return TokenUUID(Token(jobID, attempt), 0)
}

// TokenUUID is the version 5 UUID of the i-th request made under token: a
// launch of n instances that makes one request per instance gives each its
// own stable ID. TokenUUID(Token(j, a), 0) == RequestUUID(j, a).
func TokenUUID(token string, i int) string {
	name := token
	if i > 0 {
		name += "/" + strconv.Itoa(i)
	}
	return uuid.NewSHA1(namespace, []byte(name)).String()
}
