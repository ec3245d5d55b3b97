package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway/internal/redact"
)

// TLSFiles are the TLS settings of one connection (config temporal.tls and
// redis.tls). The zero value is plaintext.
type TLSFiles struct {
	// Enabled turns TLS on with the system's roots; setting any file or
	// the server name turns it on too.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs the server's certificate must
	// chain to ("" = the system's roots).
	CAFile string `yaml:"caFile"`
	// CertFile and KeyFile are this side's certificate and key (PEM), for
	// servers that demand a client certificate (mutual TLS). Both or
	// neither.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// ServerName is the name the server's certificate must carry ("" =
	// the host of the address dialled).
	ServerName string `yaml:"serverName"`
}

// On reports whether the connection uses TLS.
func (f TLSFiles) On() bool {
	return f.Enabled || f.CAFile != "" || f.CertFile != "" || f.KeyFile != "" || f.ServerName != ""
}

// Problems lists what is wrong with f, each as (field under the TLS
// section, message): a certificate without its key or the other way
// round, and files that cannot be read. Validate uses it to name fields.
func (f TLSFiles) Problems() [][2]string {
	var out [][2]string
	if (f.CertFile == "") != (f.KeyFile == "") {
		out = append(out, [2]string{"certFile", "certFile and keyFile go together: give both for mutual TLS, or neither"})
	}
	for _, file := range []struct{ field, path string }{{"caFile", f.CAFile}, {"certFile", f.CertFile}, {"keyFile", f.KeyFile}} {
		if file.path == "" {
			continue
		}
		if _, err := os.Stat(file.path); err != nil {
			out = append(out, [2]string{file.field, err.Error()})
		}
	}
	return out
}

// Config builds the client TLS config: nil when f is off.
func (f TLSFiles) Config() (*tls.Config, error) {
	if !f.On() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca file %s: no PEM certificate in it", f.CAFile)
		}
		c.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		// Read at every handshake, so a renewed certificate is used
		// without a restart.
		if _, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile); err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("tls client certificate: %w", err)
			}
			return &cert, nil
		}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, errors.New("tls: certFile and keyFile go together")
	}
	return c, nil
}

// Temporal is how to reach a Temporal frontend.
type Temporal struct {
	Address   string
	Namespace string
	TLS       TLSFiles
	// APIKey, when set, is sent with every call as a bearer token
	// (Temporal Cloud's API keys, or a frontend's authorizer). It needs
	// TLS: a key must not travel in plaintext.
	APIKey string
}

// Options fills the connection part of Temporal client options (HostPort,
// Namespace, TLS, credentials) into o and returns it.
func (t Temporal) Options(o tclient.Options) (tclient.Options, error) {
	if t.APIKey != "" && !t.TLS.On() {
		return o, errors.New("temporal: an API key needs TLS (temporal.tls)")
	}
	c, err := t.TLS.Config()
	if err != nil {
		return o, fmt.Errorf("temporal: %w", err)
	}
	o.HostPort, o.Namespace = t.Address, t.Namespace
	o.ConnectionOptions.TLS = c
	if t.APIKey != "" {
		o.Credentials = tclient.NewAPIKeyStaticCredentials(strings.TrimSpace(t.APIKey))
	}
	return o, nil
}

// Redis is how to reach the Redis view.
type Redis struct {
	// URL is a go-redis URL: redis://[user:password@]host:port/db, or
	// rediss:// for TLS; the user is an ACL user. With a master_name
	// parameter it names Redis Sentinels instead, which say where the
	// master is (and fail it over):
	// redis://sentinel-1:26379/0?master_name=gangway&addr=sentinel-2:26379
	// (the URL's user and password are the Sentinels'; the master's are
	// the username and password parameters). With cluster=true it names
	// nodes of a Redis Cluster, any of which tell the client the rest:
	// redis://node-1:6379?cluster=true&addr=node-2:6379 (no database: a
	// cluster has only 0).
	URL string
	// TLS adds a CA, a client certificate and a server name to a rediss://
	// URL's TLS; it is an error with a redis:// one.
	TLS TLSFiles
}

// Options parses the URL and applies the TLS settings. Its errors never
// quote the URL's password.
func (r Redis) Options() (*redis.Options, error) {
	o, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", redact.Error(err))
	}
	fromURL := o.TLSConfig
	if o.TLSConfig, err = r.tlsFor(fromURL); err != nil {
		return nil, err
	}
	if o.TLSConfig != nil && o.TLSConfig.ServerName == "" {
		o.TLSConfig.ServerName = fromURL.ServerName // the URL's host
	}
	return o, nil
}

// tlsFor is the TLS a client whose rediss:// URL gave it fromURL (nil for
// redis://) uses with redis.tls applied. A Sentinel or Cluster client
// dials several hosts: each is checked against its own name when the
// config names none.
func (r Redis) tlsFor(fromURL *tls.Config) (*tls.Config, error) {
	if !r.TLS.On() {
		return fromURL, nil
	}
	if fromURL == nil {
		return nil, fmt.Errorf("redis: redis.tls is set but the URL %s is not rediss://", redact.URL(r.URL))
	}
	c, err := r.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return c, nil
}

// CheckURL parses a Redis URL as Client would — a Sentinel URL (with
// master_name) as go-redis's failover client takes it, a cluster URL
// (cluster=true) as its cluster client does, any other as one server's —
// and returns the parser's error, its password never quoted.
func CheckURL(u string) error {
	r := Redis{URL: u}
	cluster, isCluster, err := r.clusterURL()
	switch {
	case err != nil:
	case isCluster:
		_, err = redis.ParseClusterURL(cluster)
	case r.Sentinel():
		_, err = redis.ParseFailoverURL(u)
	default:
		_, err = redis.ParseURL(u)
	}
	return redact.Error(err)
}

// Sentinel reports whether the URL names Redis Sentinels (master_name).
func (r Redis) Sentinel() bool {
	u, err := url.Parse(r.URL)
	return err == nil && u.Query().Get("master_name") != ""
}

// clusterURL says whether the URL names Redis Cluster nodes (cluster=true)
// and returns it without that parameter, as go-redis's cluster client
// takes it; a cluster URL that also names Sentinels is an error.
func (r Redis) clusterURL() (string, bool, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return "", false, err
	}
	q := u.Query()
	v := q.Get("cluster")
	if v == "" {
		return r.URL, false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return "", false, fmt.Errorf("cluster=%s: want true or false", v)
	}
	switch {
	case on && q.Get("master_name") != "":
		return "", false, errors.New("cluster=true and master_name name two kinds of Redis: Sentinels or a Cluster, not both")
	case on && u.Path != "" && u.Path != "/" && u.Path != "/0":
		return "", false, fmt.Errorf("a Redis Cluster has database 0 alone, got %s", u.Path)
	}
	q.Del("cluster")
	u.RawQuery, u.Path = q.Encode(), ""
	return u.String(), on, nil
}

// Client connects to the Redis view the URL names: a client of the master
// Sentinels name (go-redis's failover client, which follows a failover),
// of a Redis Cluster (its cluster client, which follows the slots' moves
// and failovers: all of Gangway's keys share one hash tag, so one slot),
// or of the one server. Its errors never quote the URL's password.
func (r Redis) Client() (redis.UniversalClient, error) {
	cluster, isCluster, err := r.clusterURL()
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", redact.Error(err))
	}
	if isCluster {
		co, err := redis.ParseClusterURL(cluster)
		if err != nil {
			return nil, fmt.Errorf("redis cluster url: %w", redact.Error(err))
		}
		if co.TLSConfig, err = r.tlsFor(co.TLSConfig); err != nil {
			return nil, err
		}
		return redis.NewClusterClient(co), nil
	}
	if !r.Sentinel() {
		o, err := r.Options()
		if err != nil {
			return nil, err
		}
		return redis.NewClient(o), nil
	}
	fo, err := redis.ParseFailoverURL(r.URL)
	if err != nil {
		return nil, fmt.Errorf("redis sentinel url: %w", redact.Error(err))
	}
	if fo.TLSConfig, err = r.tlsFor(fo.TLSConfig); err != nil {
		return nil, err
	}
	return redis.NewFailoverClient(fo), nil
}

// Describe is a connection's address fit for logs and errors: the URL's
// password hidden, and whether TLS is on.
func (r Redis) Describe() string {
	return describe(redact.URL(r.URL), r.TLS.On() || strings.HasPrefix(r.URL, "rediss://"))
}

// Describe is the frontend's address for logs, with whether TLS and an API
// key are used (never the key).
func (t Temporal) Describe() string {
	s := describe(t.Address, t.TLS.On())
	if t.APIKey != "" {
		s += " (api key)"
	}
	return s
}

func describe(addr string, tlsOn bool) string {
	if tlsOn {
		return addr + " (tls)"
	}
	return addr
}
