package transport_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gangwayhq/gangway/internal/devstack"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/transport"
)

const (
	adminPass = "admin-pass-4c1d"
	agentPass = "agent-pass-91be"
)

// TestRedisTLSAndACLUsers dials a redis-server that speaks only TLS and
// knows only ACL users, the way servers and agents do.
func TestRedisTLSAndACLUsers(t *testing.T) {
	certs, other := devstacktest.NewCerts(t), devstacktest.NewCerts(t)
	r := devstacktest.RedisWith(t, devstack.RedisOptions{
		TLS: &devstack.RedisTLS{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, CAFile: certs.CAFile},
		Users: []string{
			"admin on >" + adminPass + " ~* &* +@all",
			// Appends to log streams, nothing else.
			"agent on >" + agentPass + " resetkeys ~{gw}:log:* -@all +ping +xadd",
		},
		Auth: devstack.RedisAuth{User: "admin", Password: adminPass},
	})
	url := func(user, pass string) string { return "rediss://" + user + ":" + pass + "@" + r.Addr + "/0" }
	ca := transport.TLSFiles{CAFile: certs.CAFile}
	tests := map[string]struct {
		r       transport.Redis
		wantErr string
	}{
		"TLS, the CA, an ACL user":        {r: transport.Redis{URL: url("agent", agentPass), TLS: ca}},
		"TLS with the server name given":  {r: transport.Redis{URL: url("agent", agentPass), TLS: transport.TLSFiles{CAFile: certs.CAFile, ServerName: "localhost"}}},
		"the system's roots only":         {r: transport.Redis{URL: url("agent", agentPass)}, wantErr: "certificate signed by unknown authority"},
		"another CA":                      {r: transport.Redis{URL: url("agent", agentPass), TLS: transport.TLSFiles{CAFile: other.CAFile}}, wantErr: "certificate signed by unknown authority"},
		"a name the certificate lacks":    {r: transport.Redis{URL: url("agent", agentPass), TLS: transport.TLSFiles{CAFile: certs.CAFile, ServerName: "redis.example"}}, wantErr: "not redis.example"},
		"plaintext to the TLS port":       {r: transport.Redis{URL: "redis://agent:" + agentPass + "@" + r.Addr + "/0"}, wantErr: "EOF"},
		"wrong password":                  {r: transport.Redis{URL: url("agent", "guess"), TLS: ca}, wantErr: "WRONGPASS"},
		"no user: the default one is off": {r: transport.Redis{URL: "rediss://" + r.Addr + "/0", TLS: ca}, wantErr: "NOAUTH"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rdb := dial(t, tc.r)
			err := rdb.Ping(t.Context()).Err()
			checkErr(t, err, tc.wantErr)
			if err != nil && strings.Contains(err.Error(), agentPass) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
	t.Run("the ACL user may do only what it is given", func(t *testing.T) {
		rdb := dial(t, transport.Redis{URL: url("agent", agentPass), TLS: ca})
		ctx := t.Context()
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "{gw}:log:job-1", Values: []string{"line", "ok"}}).Err(); err != nil {
			t.Errorf("XADD to a log stream: %v", err)
		}
		checkErr(t, rdb.HSet(ctx, "{gw}:nodes", "n1", "{}").Err(), "NOPERM")
		checkErr(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: "{gw}:queue", Values: []string{"x", "y"}}).Err(), "NOPERM")
	})
}

// TestRedisMutualTLS: a server started with tls-auth-clients yes takes
// only clients showing a certificate its CA signed.
func TestRedisMutualTLS(t *testing.T) {
	certs, other := devstacktest.NewCerts(t), devstacktest.NewCerts(t)
	r := devstacktest.RedisWith(t, devstack.RedisOptions{TLS: &devstack.RedisTLS{CertFile: certs.ServerCert,
		KeyFile: certs.ServerKey, CAFile: certs.CAFile, AuthClients: true, ClientCertFile: certs.ClientCert, ClientKeyFile: certs.ClientKey}})
	url := "rediss://" + r.Addr + "/0"
	tests := map[string]struct {
		tls     transport.TLSFiles
		wantErr string
	}{
		"client certificate": {tls: transport.TLSFiles{CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}},
		"none":               {tls: transport.TLSFiles{CAFile: certs.CAFile}, wantErr: "certificate"},
		"another CA's":       {tls: transport.TLSFiles{CAFile: certs.CAFile, CertFile: other.ClientCert, KeyFile: other.ClientKey}, wantErr: "certificate"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkErr(t, dial(t, transport.Redis{URL: url, TLS: tc.tls}).Ping(t.Context()).Err(), tc.wantErr)
		})
	}
}

// TestTemporalMutualTLS dials the Temporal dev server through a proxy
// that demands a client certificate, as a frontend with mTLS does.
func TestTemporalMutualTLS(t *testing.T) {
	certs, other := devstacktest.NewCerts(t), devstacktest.NewCerts(t)
	ts := devstacktest.Temporal(t)
	proxy := devstacktest.StartMTLSProxy(t, ts.Addr, certs)
	mtls := transport.TLSFiles{CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	tests := map[string]struct {
		tls     transport.TLSFiles
		wantErr string
	}{
		"client certificate":               {tls: mtls},
		"client certificate, name checked": {tls: transport.TLSFiles{CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: "localhost"}},
		"no client certificate":            {tls: transport.TLSFiles{CAFile: certs.CAFile}, wantErr: "failed reaching server"},
		"another CA's client certificate":  {tls: transport.TLSFiles{CAFile: certs.CAFile, CertFile: other.ClientCert, KeyFile: other.ClientKey}, wantErr: "failed reaching server"},
		"a server the CA did not sign":     {tls: transport.TLSFiles{CAFile: other.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}, wantErr: "certificate signed by unknown authority"},
		"plaintext":                        {wantErr: "failed reaching server"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := transport.Temporal{Address: proxy.Addr, Namespace: ts.Namespace, TLS: tc.tls}.Options(tclient.Options{
				ConnectionOptions: tclient.ConnectionOptions{GetSystemInfoTimeout: 2 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c, err := tclient.DialContext(ctx, o)
			if err == nil {
				defer c.Close()
				_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ts.Namespace})
			}
			checkErr(t, err, tc.wantErr)
		})
	}
	accepted, refused := proxy.Counts()
	t.Logf("mTLS proxy: accepted=%d refused=%d", accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Errorf("proxy accepted %d and refused %d connections; want some of each", accepted, refused)
	}
}

// TestTemporalAPIKey dials a frontend that takes calls only with the
// right bearer token, over TLS.
func TestTemporalAPIKey(t *testing.T) {
	certs := devstacktest.NewCerts(t)
	const key = "temporal-api-key-60aa"
	addr := fakeFrontend(t, certs, key)
	ca := transport.TLSFiles{CAFile: certs.CAFile}
	tests := map[string]struct {
		key     string
		wantErr string
	}{
		"the key":     {key: key},
		"another key": {key: "guess", wantErr: "bad api key"},
		"none":        {wantErr: "bad api key"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := transport.Temporal{Address: addr, Namespace: "default", TLS: ca, APIKey: tc.key}.Options(tclient.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c, err := tclient.DialContext(ctx, o)
			if err == nil {
				c.Close()
			}
			checkErr(t, err, tc.wantErr)
		})
	}
	if _, err := (transport.Temporal{Address: addr, APIKey: key}).Options(tclient.Options{}); err == nil ||
		strings.Contains(err.Error(), key) {
		t.Errorf("an API key without TLS: error %v, want a refusal that does not show the key", err)
	}
}

// frontend answers GetSystemInfo, the call a Temporal client dials with,
// for callers with the bearer key.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	key string
}

func (f frontend) GetSystemInfo(ctx context.Context, _ *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+f.key {
		return nil, status.Error(codes.PermissionDenied, "bad api key")
	}
	return &workflowservice.GetSystemInfoResponse{}, nil
}

func fakeFrontend(t *testing.T, certs devstacktest.Certs, key string) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	workflowservice.RegisterWorkflowServiceServer(s, frontend{key: key})
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func dial(t *testing.T, r transport.Redis) *redis.Client {
	t.Helper()
	o, err := r.Options()
	if err != nil {
		t.Fatal(err)
	}
	o.MaxRetries, o.DialTimeout = -1, 2*time.Second
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one with %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %v, want one with %q", err, want)
	}
}
