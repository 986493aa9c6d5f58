package redisserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certs are PEM files of a certificate authority made for one test, a
// server certificate for 127.0.0.1 and a client certificate, both signed by
// that CA (see NewCerts). Both are valid for server and client auth on
// 127.0.0.1: a protoactor remote node is both (replies are dialled back).
type Certs struct {
	CA         string // the CA's certificate
	ServerCert string // server certificate, for IP 127.0.0.1 and name localhost
	ServerKey  string
	ClientCert string // client certificate (CN "actorlock-test-client")
	ClientKey  string
}

// NewCerts generates, in dir, a CA of its own and a server and a client
// certificate it signs (ECDSA P-256, valid from an hour ago for a day). Each
// call makes an unrelated CA: certificates of one set are refused by a
// server of another, which is how a test presents a bad certificate.
func NewCerts(dir string) (*Certs, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "actorlock test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c := &Certs{
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
	}
	if err := writePEM(c.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(cn, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames:     []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "PRIVATE KEY", keyDER)
	}
	if err := leaf("127.0.0.1", c.ServerCert, c.ServerKey); err != nil {
		return nil, err
	}
	if err := leaf("actorlock-test-client", c.ClientCert, c.ClientKey); err != nil {
		return nil, err
	}
	return c, nil
}

// ClientConfig is a TLS configuration that trusts the CA and presents the
// client certificate, for a go-redis client (redis.Options.TLSConfig).
func (c *Certs) ClientConfig() (*tls.Config, error) {
	pool, err := c.Pool()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Pool is a certificate pool holding the CA only.
func (c *Certs) Pool() (*x509.CertPool, error) {
	caPEM, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("redisserver: no certificate in " + c.CA)
	}
	return pool, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)) // never fails (crypto/rand)
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// StartTLS runs a redis-server like Start that accepts only TLS
// connections (--port 0, --tls-port) and only from clients presenting a
// certificate of its CA (--tls-auth-clients yes). The certificates are
// generated in the server's directory (Server.Certs); Server.Certs.
// ClientConfig connects to it. Restart keeps them.
func StartTLS(extra ...string) (*Server, error) {
	return start("actorlock-redis-tls-", NewCerts, extra)
}

// tlsArgs are the directives of a TLS-only server on port.
func (s *Server) tlsArgs() []string {
	return []string{
		"--port", "0", "--tls-port", fmt.Sprint(s.Port),
		"--tls-cert-file", s.Certs.ServerCert, "--tls-key-file", s.Certs.ServerKey,
		"--tls-ca-cert-file", s.Certs.CA, "--tls-auth-clients", "yes",
	}
}

// dial opens a connection to the server, over TLS with the client
// certificate if it is a TLS server.
func (s *Server) dial(timeout time.Duration) (net.Conn, error) {
	if s.Certs == nil {
		return net.DialTimeout("tcp", s.Addr, timeout)
	}
	cfg, err := s.Certs.ClientConfig()
	if err != nil {
		return nil, err
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", s.Addr, cfg)
}
