package transport_test

import (
	"strings"
	"testing"

	"github.com/gangwayhq/gangway/internal/transport"
)

func TestRedisOptionsErrors(t *testing.T) {
	tests := map[string]struct {
		r       transport.Redis
		wantErr string
	}{
		"tls settings on a redis:// URL": {r: transport.Redis{URL: "redis://u:s3cret@h:6379/0", TLS: transport.TLSFiles{CAFile: "ca.pem"}},
			wantErr: "redis.tls is set but the URL redis://u:xxxxx@h:6379/0 is not rediss://"},
		"a malformed URL hides its password": {r: transport.Redis{URL: "redis://u:s3/cret@h:port"}, wantErr: "redis url:"},
		"a CA file that is missing":          {r: transport.Redis{URL: "rediss://h:6379", TLS: transport.TLSFiles{CAFile: "/nonexistent/ca.pem"}}, wantErr: "no such file"},
		"a certificate without its key":      {r: transport.Redis{URL: "rediss://h:6379", TLS: transport.TLSFiles{CertFile: "c.pem"}}, wantErr: "certFile and keyFile go together"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := tc.r.Options()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Options() error %v, want one with %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
	o, err := transport.Redis{URL: "rediss://h:6380/0"}.Options()
	if err != nil || o.TLSConfig == nil || o.TLSConfig.ServerName != "h" {
		t.Errorf("rediss:// without settings: %+v, %v; want TLS to h with the system's roots", o, err)
	}
}

func TestDescribe(t *testing.T) {
	if got := (transport.Redis{URL: "rediss://agent:s3cret@h:6380/0"}).Describe(); got != "rediss://agent:xxxxx@h:6380/0 (tls)" {
		t.Errorf("Redis.Describe = %q", got)
	}
	if got := (transport.Temporal{Address: "t:7233", TLS: transport.TLSFiles{Enabled: true}, APIKey: "k3y"}).Describe(); got != "t:7233 (tls) (api key)" {
		t.Errorf("Temporal.Describe = %q", got)
	}
}
