package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
)

// httpsFlags are serve's HTTPS flags.
type httpsFlags struct {
	cert, key, clientCA, peerCA string
}

func (h *httpsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.cert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS with; reloaded on SIGHUP (with --tls-key)")
	fs.StringVar(&h.key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&h.clientCA, "client-ca", "", "PEM CA file: require API clients to present a certificate it signs (mTLS; needs --tls-cert)")
	fs.StringVar(&h.peerCA, "peer-ca", "", "PEM CA file that signs the other instances' --tls-cert, for peer reads over HTTPS (default: --client-ca, else the system roots)")
}

func (h *httpsFlags) check() error {
	switch {
	case (h.cert == "") != (h.key == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case h.clientCA != "" && h.cert == "":
		return errors.New("--client-ca needs --tls-cert and --tls-key: client certificates are a TLS feature")
	case h.peerCA != "" && h.cert == "":
		return errors.New("--peer-ca needs --tls-cert and --tls-key: peers speak HTTPS only when this instance does")
	}
	return nil
}

func (h *httpsFlags) enabled() bool { return h.cert != "" }

// serverTLS builds the HTTPS config: the certificate comes from r at each handshake, so a
// reload reaches new connections while open ones keep the certificate they began with.
func (h *httpsFlags) serverTLS() (*tls.Config, *certReloader, error) {
	r := &certReloader{certFile: h.cert, keyFile: h.key}
	if err := r.reload(); err != nil {
		return nil, nil, fmt.Errorf("--tls-cert: %w", err)
	}
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.getCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
	if h.clientCA != "" {
		pool, err := loadCAs(h.clientCA)
		if err != nil {
			return nil, nil, fmt.Errorf("--client-ca: %w", err)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, r, nil
}

// certReloader holds the serving certificate and swaps it on reload. Safe for concurrent
// use: handshakes read it while a SIGHUP replaces it.
type certReloader struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// reload reads the pair again; on error the previous certificate stays in use.
func (r *certReloader) reload() error {
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.cur.Store(&pair)
	return nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load(), nil
}

// reloadOnHUP reloads r on every SIGHUP until ctx ends (onHUP).
func reloadOnHUP(ctx context.Context, r *certReloader, log *slog.Logger) {
	onHUP(ctx, func() {
		if err := r.reload(); err != nil {
			log.Error("SIGHUP: reloading the TLS certificate failed; serving the previous one", "cert", r.certFile, "err", err)
		} else {
			log.Info("SIGHUP: TLS certificate reloaded", "cert", r.certFile)
		}
	})
}

// tlsListener wraps ln in TLS when HTTPS is on. Connections count against the per-client
// cap before the handshake (the cap wraps the raw listener, under TLS).
func tlsListener(ln net.Listener, c *tls.Config) net.Listener {
	if c == nil {
		return ln
	}
	return tls.NewListener(ln, c)
}
