// Package tlstest makes throwaway certificate authorities and certificates for tests of
// TLS and mTLS on loopback: a CA, server certificates for 127.0.0.1 and localhost, and
// client certificates, each written as PEM files into the test's temporary directory
// (servers such as redis-server and kcat take files, not Go values).
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority living for one test. Its methods are safe for concurrent use.
type CA struct {
	// CertFile is the CA certificate, PEM.
	CertFile string
	// Pool holds the CA certificate, for a client's RootCAs or a server's ClientCAs.
	Pool *x509.CertPool

	t    testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	n    atomic.Int64
}

// Pair is one issued certificate and its key, as files and as a tls.Certificate.
type Pair struct {
	CertFile, KeyFile string
	Cert              tls.Certificate
	// Serial tells two pairs of the same CA apart (a reloaded certificate, say).
	Serial *big.Int
}

// NewCA makes a CA named name and writes its certificate to a file. It fails the test on error.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: CA certificate: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key, Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.n.Store(1)
	ca.CertFile = ca.write(name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost (plus extra DNS names).
func (ca *CA) Server(name string, dns ...string) Pair {
	return ca.issue(name, x509.ExtKeyUsageServerAuth, append([]string{"localhost"}, dns...))
}

// Client issues a client certificate with common name name.
func (ca *CA) Client(name string) Pair {
	return ca.issue(name, x509.ExtKeyUsageClientAuth, nil)
}

// ServerTLS is a server tls.Config with a fresh server certificate; with clientCAs set it
// requires and verifies client certificates (mTLS).
func (ca *CA) ServerTLS(clientCAs *x509.CertPool) *tls.Config {
	p := ca.Server("server")
	c := &tls.Config{Certificates: []tls.Certificate{p.Cert}, MinVersion: tls.VersionTLS12}
	if clientCAs != nil {
		c.ClientCAs = clientCAs
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

func (ca *CA) issue(name string, usage x509.ExtKeyUsage, dns []string) Pair {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatalf("tlstest: key: %v", err)
	}
	serial := big.NewInt(ca.n.Add(1))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatalf("tlstest: certificate %s: %v", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatalf("tlstest: key %s: %v", name, err)
	}
	base := name + "-" + serial.String()
	p := Pair{
		CertFile: ca.write(base+".pem", "CERTIFICATE", der),
		KeyFile:  ca.write(base+"-key.pem", "PRIVATE KEY", kder),
		Serial:   serial,
	}
	if p.Cert, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
		ca.t.Fatalf("tlstest: loading %s: %v", name, err)
	}
	return p
}

func (ca *CA) write(name, typ string, der []byte) string {
	ca.t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatalf("tlstest: writing %s: %v", path, err)
	}
	return path
}
