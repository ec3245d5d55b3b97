package nodeauth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// uses counts launch token uses in memory, as capacity.View does in Redis.
type uses struct {
	mu    sync.Mutex
	nodes map[string]map[string]bool
}

func (u *uses) ClaimJoinUse(_ context.Context, launch, nodeID string, max int, _ time.Time) (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.nodes == nil {
		u.nodes = map[string]map[string]bool{}
	}
	s := u.nodes[launch]
	if s == nil {
		s = map[string]bool{}
		u.nodes[launch] = s
	}
	if s[nodeID] {
		return true, nil
	}
	if len(s) >= max {
		return false, nil
	}
	s[nodeID] = true
	return true, nil
}

const (
	poolToken = "gwj-pool-onprem-3f9c"
	nodeToken = "gwj-node-gpu-7-a11e"
	secret1   = "0123456789abcdef0123456789abcdef-one"
	secret2   = "fedcba9876543210fedcba9876543210-two"
)

type fixture struct {
	dir, tokens, secrets string
	now                  time.Time
	a                    *Authority
}

func newFixture(t *testing.T, secrets ...string) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	f.tokens = filepath.Join(f.dir, "join-tokens")
	f.secrets = filepath.Join(f.dir, "join-secret")
	f.writeTokens(t, "# the onprem pool\n"+TokenLine(poolToken, "onprem", "")+"\n"+TokenLine(nodeToken, "", "gpu-7")+"\n")
	if err := os.WriteFile(f.secrets, []byte(strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.open(t)
	return f
}

func (f *fixture) open(t *testing.T) {
	t.Helper()
	a, err := Open(Options{TokensFile: f.tokens, SecretFile: f.secrets, Uses: &uses{}, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
}

func (f *fixture) writeTokens(t *testing.T, data string) {
	t.Helper()
	if err := os.WriteFile(f.tokens, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	// The file is read again when its time or size changes.
	f.now = f.now.Add(time.Second)
	if err := os.Chtimes(f.tokens, f.now, f.now); err != nil {
		t.Fatal(err)
	}
}

// check proves credential for a request of nodeID in pool and checks it.
func (f *fixture) check(nodeID, pool, credential string) (Grant, error) {
	msg := []byte("request of " + nodeID)
	return f.a.Check(context.Background(), nodeID, pool, Prove(credential, msg), msg)
}

func TestCheck(t *testing.T) {
	f := newFixture(t, secret1)
	launch2, err := f.a.LaunchToken("aws-spot", "gw-launch-1", 2, f.now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name             string
		node, pool, cred string
		want             Grant
		wantErr          string
	}{
		{name: "pool token", node: "gpu-1", pool: "onprem", cred: poolToken, want: Grant{Kind: KindPool}},
		{name: "pool token, another pool", node: "gpu-1", pool: "other", cred: poolToken, wantErr: "the join token is for pool onprem, not other"},
		{name: "node token", node: "gpu-7", pool: "onprem", cred: nodeToken, want: Grant{Kind: KindNode, Bound: true}},
		{name: "node token of another node", node: "gpu-1", pool: "onprem", cred: nodeToken, wantErr: "the join token is another node's"},
		{name: "unknown token", node: "gpu-1", pool: "onprem", cred: "gwj-guess", wantErr: "not in the server's token file"},
		{name: "no token", node: "gpu-1", pool: "onprem", wantErr: "no credential"},
		{name: "issued node token", node: "gpu-1", pool: "onprem", cred: f.a.NodeToken("gpu-1", "onprem"), want: Grant{Kind: KindIssued, Bound: true}},
		{name: "issued token of another node", node: "gpu-2", pool: "onprem", cred: f.a.NodeToken("gpu-1", "onprem"), wantErr: "the node token is not this node's"},
		{name: "issued token of another pool", node: "gpu-1", pool: "other", cred: f.a.NodeToken("gpu-1", "onprem"), wantErr: "the node token is not this node's"},
		{name: "launch token, first node", node: "i-1", pool: "aws-spot", cred: launch2, want: Grant{Kind: KindLaunch}},
		{name: "launch token, second node", node: "i-2", pool: "aws-spot", cred: launch2, want: Grant{Kind: KindLaunch}},
		{name: "launch token, first node again", node: "i-1", pool: "aws-spot", cred: launch2, want: Grant{Kind: KindLaunch}},
		{name: "launch token, a third node", node: "i-3", pool: "aws-spot", cred: launch2, wantErr: "the launch token is used up: it was for 2 nodes, which joined already"},
		{name: "launch token, another pool", node: "i-4", pool: "onprem", cred: launch2, wantErr: "the launch token is for pool aws-spot, not onprem"},
		{name: "launch token with changed claims", node: "i-5", pool: "aws-spot", cred: tamper(launch2), wantErr: "not one this server signed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.check(tc.node, tc.pool, tc.cred)
			checkRefusal(t, err, tc.wantErr)
			if err == nil && got != tc.want {
				t.Errorf("grant %+v, want %+v", got, tc.want)
			}
			if err != nil && tc.cred != "" && strings.Contains(err.Error(), tc.cred) {
				t.Errorf("the refusal shows the credential: %v", err)
			}
		})
	}
}

// tamper raises the launch token's count without re-signing it.
func tamper(token string) string {
	claims, mac, _ := strings.Cut(strings.TrimPrefix(token, launchPrefix), ".")
	return launchPrefix + strings.Replace(claims, "Ij", "Ik", 1) + "." + mac
}

func TestProofIsForOneRequest(t *testing.T) {
	f := newFixture(t, secret1)
	p := Prove(poolToken, []byte("register gpu-1 with 8 GPUs"))
	if _, err := f.a.Check(context.Background(), "gpu-1", "onprem", p, []byte("register gpu-1 with 8 GPUs")); err != nil {
		t.Fatalf("the request proved: %v", err)
	}
	_, err := f.a.Check(context.Background(), "gpu-1", "onprem", p, []byte("register gpu-1 with 1 GPU"))
	checkRefusal(t, err, "not in the server's token file")
}

func TestLaunchTokenExpires(t *testing.T) {
	f := newFixture(t, secret1)
	expires := f.now.Add(10 * time.Minute)
	tok, err := f.a.LaunchToken("aws-spot", "gw-launch-2", 1, expires)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := f.a.LaunchToken("aws-spot", "gw-launch-2", 1, expires)
	if tok != again {
		t.Error("LaunchToken is not a pure function of its arguments: a retried launch would change its boot data")
	}
	f.now = f.now.Add(11 * time.Minute)
	_, err = f.check("i-1", "aws-spot", tok)
	checkRefusal(t, err, "the launch token expired at "+expires.Format(time.RFC3339))
}

// TestRotation: a token file edited in place takes effect at once; a
// secret rotated with overlap keeps the node tokens it signed good until
// it is dropped.
func TestRotation(t *testing.T) {
	f := newFixture(t, secret1)
	if _, err := f.check("gpu-1", "onprem", poolToken); err != nil {
		t.Fatal(err)
	}
	const rotated = "gwj-pool-onprem-rotated-77d0"
	f.writeTokens(t, TokenLine(rotated, "onprem", "")+"\n")
	_, err := f.check("gpu-1", "onprem", poolToken)
	checkRefusal(t, err, "not in the server's token file")
	if _, err := f.check("gpu-1", "onprem", rotated); err != nil {
		t.Errorf("the new token: %v", err)
	}

	old := f.a.NodeToken("gpu-1", "onprem")
	if err := os.WriteFile(f.secrets, []byte(secret2+"\n"+secret1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.open(t)
	if _, err := f.check("gpu-1", "onprem", old); err != nil {
		t.Errorf("a node token of the previous secret, still listed: %v", err)
	}
	if f.a.NodeToken("gpu-1", "onprem") == old {
		t.Error("the new secret signs the same node token")
	}
	if err := os.WriteFile(f.secrets, []byte(secret2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.open(t)
	_, err = f.check("gpu-1", "onprem", old)
	checkRefusal(t, err, "signed with a secret the server no longer has")
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := map[string]struct {
		o       Options
		wantErr string
	}{
		"short secret":         {o: Options{SecretFile: write("short", "abc\n"), Uses: &uses{}}, wantErr: "line 1 is 3 bytes; a secret needs at least 32"},
		"secret without uses":  {o: Options{SecretFile: write("ok", secret1+"\n")}, wantErr: "Options.Uses is required"},
		"bad digest":           {o: Options{TokensFile: write("t1", "sha256:abc pool=onprem\n")}, wantErr: "line 1: want sha256:<64 hex digits> first"},
		"no scope":             {o: Options{TokensFile: write("t2", TokenLine("x", "onprem", "")[:71]+"\n")}, wantErr: "line 1: want sha256:<digest> and one of pool=NAME or node=ID"},
		"bad scope":            {o: Options{TokensFile: write("t3", strings.Replace(TokenLine("x", "onprem", ""), "pool=onprem", "team=ml", 1)+"\n")}, wantErr: `line 1: want pool=NAME or node=ID (a DNS label), got "team=ml"`},
		"the same token twice": {o: Options{TokensFile: write("t4", TokenLine("x", "a", "")+"\n"+TokenLine("x", "b", "")+"\n")}, wantErr: "line 2: the same token is listed twice"},
		"a token file missing": {o: Options{TokensFile: filepath.Join(dir, "missing")}, wantErr: "no such file"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Open(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Open: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
	a, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Check(context.Background(), "gpu-1", "onprem", Prove(poolToken, nil), nil)
	checkRefusal(t, err, "this server accepts no joins")
}

func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && err == nil:
		t.Fatalf("accepted; want a refusal with %q", want)
	case want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want)):
		t.Fatalf("error %v, want ErrRefused with %q", err, want)
	}
}
