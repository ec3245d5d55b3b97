package devstacktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Certs are PEM files of a test CA and of a server and a client
// certificate it signed, in a directory of the test. The server's is for
// 127.0.0.1 and localhost; the client's names Client.
type Certs struct {
	Dir                   string
	CAFile                string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// Client is the client certificate's common name.
	Client string
}

// NewCerts makes a fresh CA and certificates for the test. Call it twice
// for a second CA whose certificates the first's servers refuse.
func NewCerts(t testing.TB) Certs {
	t.Helper()
	dir := t.TempDir()
	c := Certs{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"), Client: "gangway-test-client"}
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: "gangway test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("devstacktest: CA: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, c.CAFile, "CERTIFICATE", caDER)
	leaf := func(cn string, usage x509.ExtKeyUsage, certFile, keyFile string, ips []net.IP, dns []string) {
		key := newKey(t)
		tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("devstacktest: certificate %s: %v", cn, err)
		}
		writePEM(t, certFile, "CERTIFICATE", der)
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, keyFile, "PRIVATE KEY", kder)
	}
	leaf("localhost", x509.ExtKeyUsageServerAuth, c.ServerCert, c.ServerKey, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	leaf(c.Client, x509.ExtKeyUsageClientAuth, c.ClientCert, c.ClientKey, nil, nil)
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// MTLSProxy is a TLS-terminating TCP proxy in front of a plaintext
// server: it demands a client certificate signed by the CA of its Certs,
// shows the server certificate, and pipes each connection to Backend.
// gRPC runs through it unchanged, so it stands in for a Temporal frontend
// that requires mutual TLS.
type MTLSProxy struct {
	Addr    string
	Backend string

	ln       net.Listener
	mu       sync.Mutex
	accepted int
	refused  int
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

// StartMTLSProxy listens on a free port of 127.0.0.1 until the test ends.
func StartMTLSProxy(t testing.TB, backend string, c Certs) *MTLSProxy {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(c.ServerCert, c.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	pemCA, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	p := &MTLSProxy{Addr: ln.Addr().String(), Backend: backend, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// Counts reports the connections that completed the handshake and those
// refused (no certificate, or one the CA did not sign).
func (p *MTLSProxy) Counts() (accepted, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.refused
}

func (p *MTLSProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.pipe(c.(*tls.Conn)) })
	}
}

func (p *MTLSProxy) pipe(c *tls.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		p.mu.Lock()
		p.refused++
		p.mu.Unlock()
		return
	}
	_ = c.SetDeadline(time.Time{})
	b, err := net.Dial("tcp", p.Backend)
	if err != nil {
		return
	}
	defer b.Close()
	p.mu.Lock()
	p.accepted++
	p.conns[c], p.conns[b] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, b)
	p.mu.Unlock()
}

func (p *MTLSProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
