package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/client"
)

// testCA signs certificates for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf for subject; server leaves are for 127.0.0.1.
func (ca *testCA) issue(t *testing.T, subject pkix.Name, server bool) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

// TestClientCertificates: over TLS with a client CA, a certificate the CA
// signed is an identity (CN user, OU teams); a request with neither it nor
// a token is a 401, and a certificate from another CA is refused in the
// handshake.
func TestClientCertificates(t *testing.T) {
	ca, stranger := newTestCA(t), newTestCA(t)
	dir := t.TempDir()
	_, certPEM, keyPEM := ca.issue(t, pkix.Name{CommonName: "gangway"}, true)
	files := TLSFiles{Cert: filepath.Join(dir, "api.pem"), Key: filepath.Join(dir, "api.key"), ClientCA: filepath.Join(dir, "ca.pem")}
	for path, data := range map[string][]byte{files.Cert: certPEM, files.Key: keyPEM, files.ClientCA: ca.pem} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ts := newTestServer(t)
	s, tlsConfig, err := Setup(context.Background(), Config{TLS: files, TokenFile: filepath.Join(dir, "tokens"), AdminGroup: "ops"},
		Options{Client: ts.srv.o.Client, Jobs: ts.jobs, Fleet: ts.view})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.TLS = tlsConfig
	hs.StartTLS()
	t.Cleanup(hs.Close)

	carol, _, _ := ca.issue(t, pkix.Name{CommonName: "carol", OrganizationalUnit: []string{"vision", "ops"}}, false)
	mallory, _, _ := stranger.issue(t, pkix.Name{CommonName: "mallory", OrganizationalUnit: []string{"ops"}}, false)
	dial := func(certs ...tls.Certificate) *client.Client {
		c, err := client.NewAPI(client.APIOptions{URL: hs.URL, TLS: &tls.Config{RootCAs: ca.pool, Certificates: certs}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	id, err := dial(carol).WhoAmI(context.Background())
	if want := (Identity{User: "carol", Teams: []string{"vision"}, Admin: true, Via: "cert"}); err != nil || !cmp.Equal(id, want) {
		t.Errorf("carol's certificate: %+v, %v; want %+v", id, err, want)
	}
	if _, err := dial().WhoAmI(context.Background()); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("no certificate, no token: %v, want ErrUnauthenticated", err)
	}
	if _, err := dial(mallory).WhoAmI(context.Background()); err == nil {
		t.Error("a certificate from another CA was accepted")
	}
}
