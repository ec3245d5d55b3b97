package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// TLSFiles are the listener's certificate and key and, to verify client
// certificates, the CA that signs them; all empty serves plain HTTP.
type TLSFiles struct {
	Cert, Key string
	// ClientCA, when set, asks every client for a certificate and
	// verifies any it sends (a request may still use a token instead).
	ClientCA string
}

// Config returns the TLS config the files describe; nil for plain HTTP.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f.Cert == "" && f.Key == "" {
		if f.ClientCA != "" {
			return nil, errors.New("a client CA needs TLS: set the certificate and key too")
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA %s: no PEM certificate in it", f.ClientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return c, nil
}

// Serve serves h on addr (TLS when tlsConfig is set) until ctx ends, then
// shuts down, giving open requests (followed logs) a few seconds. ready,
// if set, gets the address it listens on.
func Serve(ctx context.Context, addr string, tlsConfig *tls.Config, h http.Handler, log *slog.Logger, ready func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("api listen %s: %w", addr, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("api: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
	return nil
}
