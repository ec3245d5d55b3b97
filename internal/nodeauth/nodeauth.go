package nodeauth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// ErrRefused is wrapped by every refusal; the message says why without
// quoting the credential.
var ErrRefused = errors.New("join refused")

// Kind is what a credential is.
type Kind string

// Credential kinds.
const (
	KindPool   Kind = "pool"   // a join token of a pool
	KindNode   Kind = "node"   // a join token of one node
	KindLaunch Kind = "launch" // a one-use launch token
	KindIssued Kind = "issued" // a node token the server issued
)

// Grant is what a credential allows the caller.
type Grant struct {
	Kind Kind
	// Bound: the credential names this node, so it may take over the node
	// while it is registered and alive (an agent restarting). A pool or
	// launch credential may not.
	Bound bool
}

// Uses counts the nodes a launch token registered; *capacity.View is one.
type Uses interface {
	// ClaimJoinUse records nodeID as a use of launch, which allows max
	// nodes until until; it reports false when max other nodes used it.
	ClaimJoinUse(ctx context.Context, launch, nodeID string, max int, until time.Time) (bool, error)
}

// Options configure an Authority.
type Options struct {
	// TokensFile lists the join tokens, hashed (see parseTokens); "" means
	// none.
	TokensFile string
	// SecretFile holds the join secrets, one per line, each at least 32
	// bytes: the first signs launch and node tokens, all verify them (keep
	// the previous one listed while nodes still hold tokens it signed).
	// "" means no launch or node tokens.
	SecretFile string
	// Uses records launch token uses (required with a SecretFile).
	Uses Uses
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Authority checks join credentials. It is safe for concurrent use.
type Authority struct {
	o       Options
	secrets [][]byte

	mu      sync.Mutex
	tokens  map[string]scope // SHA-256 hex → what it may join as
	modTime time.Time
	size    int64
}

type scope struct{ pool, node string }

// Open reads the secret file and the token file.
func Open(o Options) (*Authority, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Authority{o: o}
	if o.SecretFile != "" {
		data, err := os.ReadFile(o.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("join secret: %w", err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if len(line) < 32 {
				return nil, fmt.Errorf("join secret %s: line %d is %d bytes; a secret needs at least 32 (openssl rand -hex 32)", o.SecretFile, i+1, len(line))
			}
			a.secrets = append(a.secrets, []byte(line))
		}
		if len(a.secrets) == 0 {
			return nil, fmt.Errorf("join secret %s: no secret in it", o.SecretFile)
		}
		if o.Uses == nil {
			return nil, errors.New("join secret: Options.Uses is required to count launch token uses")
		}
	}
	if _, err := a.loadTokens(); err != nil {
		return nil, err
	}
	return a, nil
}

// Signs reports whether the authority has a secret to sign launch and
// node tokens with.
func (a *Authority) Signs() bool { return a != nil && len(a.secrets) > 0 }

// Enabled reports whether any credential could be accepted.
func (a *Authority) Enabled() bool {
	if a == nil {
		return false
	}
	t, _ := a.loadTokens()
	return len(a.secrets) > 0 || len(t) > 0
}

// Credential kinds as an agent's proof names them.
const (
	proofToken  = "token"  // a join token of the token file
	proofIssued = "node"   // a node token this server issued
	proofLaunch = "launch" // a launch token this server signed
)

// Token prefixes: what the server signs, told apart from file tokens.
const (
	issuedPrefix = "gwn."
	launchPrefix = "gwl."
)

// Prove is the agent's side: the proof that it holds credential (a join
// token, a launch token or a node token), for msg.
func Prove(credential string, msg []byte) workflows.NodeProof {
	switch {
	case credential == "":
		return workflows.NodeProof{}
	case strings.HasPrefix(credential, issuedPrefix):
		return workflows.NodeProof{Kind: proofIssued, MAC: mac([]byte(credential), msg)}
	case strings.HasPrefix(credential, launchPrefix):
		claims, _, _ := strings.Cut(strings.TrimPrefix(credential, launchPrefix), ".")
		return workflows.NodeProof{Kind: proofLaunch, Claims: claims, MAC: mac([]byte(credential), msg)}
	}
	sum := sha256.Sum256([]byte(credential))
	return workflows.NodeProof{Kind: proofToken, MAC: mac(sum[:], msg)}
}

// Check reports what the credential behind p allows the agent that
// registers nodeID in pool, for the request msg, or an error wrapping
// ErrRefused.
func (a *Authority) Check(ctx context.Context, nodeID, pool string, p workflows.NodeProof, msg []byte) (Grant, error) {
	refuse := func(format string, args ...any) (Grant, error) {
		return Grant{}, fmt.Errorf("%w: node %s: %s", ErrRefused, nodeID, fmt.Sprintf(format, args...))
	}
	if a == nil || !a.Enabled() {
		return refuse("this server accepts no joins (server.join.tokensFile and server.join.secretFile are unset)")
	}
	if p.MAC == "" {
		return refuse("no credential (give the agent a join token: --join-token-file or GANGWAY_JOIN_TOKEN)")
	}
	switch p.Kind {
	case proofIssued:
		for _, k := range a.secrets {
			if equal(mac([]byte(a.nodeToken(k, nodeID, pool)), msg), p.MAC) {
				return Grant{Kind: KindIssued, Bound: true}, nil
			}
		}
		return refuse("the node token is not this node's in pool %s, or was signed with a secret the server no longer has", pool)
	case proofLaunch:
		return a.checkLaunch(ctx, nodeID, pool, p, msg, refuse)
	case proofToken:
	default:
		return refuse("unknown credential kind %q", p.Kind)
	}
	tokens, err := a.loadTokens()
	if err != nil {
		return Grant{}, err
	}
	for digest, sc := range tokens {
		key, _ := hex.DecodeString(digest)
		if !equal(mac(key, msg), p.MAC) {
			continue
		}
		switch {
		case sc.node != "" && sc.node != nodeID:
			return refuse("the join token is another node's")
		case sc.node != "":
			return Grant{Kind: KindNode, Bound: true}, nil
		case sc.pool != pool:
			return refuse("the join token is for pool %s, not %s", sc.pool, pool)
		}
		return Grant{Kind: KindPool}, nil
	}
	return refuse("the join token is not in the server's token file")
}

// Vouches checks a record an agent signed for its node (a
// workflows.TaskDone): the proof must be of a credential for that node
// alone — its node token or a per-node join token. A pool's join token or
// a launch token vouches for no node's record; the error, wrapping
// ErrRefused, says why.
func (a *Authority) Vouches(ctx context.Context, nodeID, pool string, p workflows.NodeProof, msg []byte) error {
	if p.Kind == proofLaunch {
		return fmt.Errorf("%w: node %s: a launch token signs no record", ErrRefused, nodeID)
	}
	g, err := a.Check(ctx, nodeID, pool, p, msg)
	if err != nil {
		return err
	}
	if !g.Bound {
		return fmt.Errorf("%w: node %s: a pool's join token signs no record", ErrRefused, nodeID)
	}
	return nil
}

// NodeToken is the token the server hands a node that joined: signed with
// the current secret for the node and its pool; "" without a secret.
func (a *Authority) NodeToken(nodeID, pool string) string {
	if a == nil || len(a.secrets) == 0 {
		return ""
	}
	return a.nodeToken(a.secrets[0], nodeID, pool)
}

func (a *Authority) nodeToken(key []byte, nodeID, pool string) string {
	return issuedPrefix + mac(key, []byte("node\x00"+nodeID+"\x00"+pool))
}

// launchClaims is the signed part of a launch token.
type launchClaims struct {
	Pool    string `json:"p"`
	Launch  string `json:"l"`
	Count   int    `json:"n"`
	Expires int64  `json:"e"` // unix seconds
}

// LaunchToken signs a token that lets count nodes of pool join until
// expires: the boot data of one launch (launch is its idempotency token).
// It is a pure function of its arguments and the current secret, so a
// retried launch renders the same boot data.
func (a *Authority) LaunchToken(pool, launch string, count int, expires time.Time) (string, error) {
	if a == nil || len(a.secrets) == 0 {
		return "", errors.New("launch token: no join secret (server.join.secretFile)")
	}
	payload, err := json.Marshal(launchClaims{Pool: pool, Launch: launch, Count: count, Expires: expires.Unix()})
	if err != nil {
		return "", err
	}
	return a.launchToken(a.secrets[0], base64.RawURLEncoding.EncodeToString(payload)), nil
}

func (a *Authority) launchToken(key []byte, claims string) string {
	return launchPrefix + claims + "." + mac(key, []byte("launch\x00"+claims))
}

func (a *Authority) checkLaunch(ctx context.Context, nodeID, pool string, p workflows.NodeProof, msg []byte,
	refuse func(string, ...any) (Grant, error)) (Grant, error) {
	signed := false
	for _, k := range a.secrets {
		if equal(mac([]byte(a.launchToken(k, p.Claims)), msg), p.MAC) {
			signed = true
		}
	}
	if !signed {
		return refuse("the launch token is not one this server signed")
	}
	raw, err := base64.RawURLEncoding.DecodeString(p.Claims)
	var c launchClaims
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	switch {
	case err != nil:
		return refuse("the launch token does not decode")
	case c.Pool != pool:
		return refuse("the launch token is for pool %s, not %s", c.Pool, pool)
	case !a.o.Now().Before(time.Unix(c.Expires, 0)):
		return refuse("the launch token expired at %s", time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))
	}
	ok, err := a.o.Uses.ClaimJoinUse(ctx, c.Launch, nodeID, c.Count, time.Unix(c.Expires, 0))
	if err != nil {
		return Grant{}, fmt.Errorf("launch token use: %w", err)
	}
	if !ok {
		return refuse("the launch token is used up: it was for %s, which joined already", plural(c.Count, "node"))
	}
	return Grant{Kind: KindLaunch}, nil
}

func mac(key, msg []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// loadTokens reads the token file when it changed since the last read.
func (a *Authority) loadTokens() (map[string]scope, error) {
	if a.o.TokensFile == "" {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fi, err := os.Stat(a.o.TokensFile)
	if err != nil {
		return nil, fmt.Errorf("join tokens: %w", err)
	}
	if a.tokens != nil && fi.ModTime().Equal(a.modTime) && fi.Size() == a.size {
		return a.tokens, nil
	}
	data, err := os.ReadFile(a.o.TokensFile)
	if err != nil {
		return nil, fmt.Errorf("join tokens: %w", err)
	}
	t, err := parseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("join tokens %s: %w", a.o.TokensFile, err)
	}
	a.tokens, a.modTime, a.size = t, fi.ModTime(), fi.Size()
	return t, nil
}

// parseTokens reads a token file: one token per line, as
//
//	sha256:<64 hex digits> pool=<pool>
//	sha256:<64 hex digits> node=<node ID>
//
// with # comments and blank lines. The digest is of the token as the
// agent shows it (printf %s "$TOKEN" | sha256sum).
func parseTokens(data []byte) (map[string]scope, error) {
	out := map[string]scope{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		digest, ok := strings.CutPrefix(fields[0], "sha256:")
		if b, err := hex.DecodeString(digest); !ok || err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("line %d: want sha256:<64 hex digits> first", n)
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want sha256:<digest> and one of pool=NAME or node=ID", n)
		}
		var s scope
		k, v, _ := strings.Cut(fields[1], "=")
		switch {
		case k == "pool" && gangway.IsDNSLabel(v):
			s.pool = v
		case k == "node" && gangway.IsDNSLabel(v):
			s.node = v
		default:
			return nil, fmt.Errorf("line %d: want pool=NAME or node=ID (a DNS label), got %q", n, fields[1])
		}
		digest = strings.ToLower(digest)
		if _, dup := out[digest]; dup {
			return nil, fmt.Errorf("line %d: the same token is listed twice", n)
		}
		out[digest] = s
	}
	return out, sc.Err()
}

// TokenLine is the token file line for token: what an operator appends to
// let it join as pool (or, with node set, as that one node).
func TokenLine(token, pool, node string) string {
	sum := sha256.Sum256([]byte(token))
	if node != "" {
		return "sha256:" + hex.EncodeToString(sum[:]) + " node=" + node
	}
	return "sha256:" + hex.EncodeToString(sum[:]) + " pool=" + pool
}
