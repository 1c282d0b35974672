package ingest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SASL mechanisms of Security.SASL, as Kafka names them in lower case.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// Security says how every Kafka connection of slide is made: the consumer group, the
// partition readers, the dead-letter writer and the producer all dial with the one
// *kafka.Dialer that Dialer returns. The zero value is plaintext without authentication
// (Kafka's PLAINTEXT); TLS alone is SSL, SASL alone SASL_PLAINTEXT, both SASL_SSL.
type Security struct {
	// TLS, when not nil, wraps every connection in TLS with this config: RootCAs for a
	// private CA, Certificates for mTLS, ServerName when the brokers' names differ from
	// the addresses dialled. Nil: plaintext.
	TLS *tls.Config
	// SASL is the mechanism: "" (none), SASLPlain, SASLScramSHA256 or SASLScramSHA512,
	// using kafka-go's sasl/plain and sasl/scram.
	SASL string
	// User and Password are the SASL credentials; both are required with SASL. Password
	// never appears in String or in errors of this package.
	User, Password string
	// DialTimeout bounds one connect, TLS handshake and SASL exchange; default 10 s.
	DialTimeout time.Duration
}

// Validate reports a Security Dialer would refuse.
func (s Security) Validate() error {
	switch s.SASL {
	case "":
		if s.User != "" || s.Password != "" {
			return errors.New("kafka: a SASL user or password without a SASL mechanism")
		}
		return nil
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		return fmt.Errorf("kafka: SASL mechanism %q: want %s, %s or %s", s.SASL, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	switch {
	case s.User == "":
		return fmt.Errorf("kafka: SASL %s needs a user", s.SASL)
	case s.Password == "":
		return fmt.Errorf("kafka: SASL %s needs a password", s.SASL)
	case s.DialTimeout < 0:
		return fmt.Errorf("kafka: dial timeout %s: must not be negative", s.DialTimeout)
	}
	return nil
}

// Dialer returns the dialer every Kafka connection uses (the Dialer fields of Config and
// ProducerConfig). SASL PLAIN sends the password in the clear unless TLS is set too.
func (s Security) Dialer() (*kafka.Dialer, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	d := &kafka.Dialer{Timeout: s.DialTimeout, DualStack: true, TLS: s.TLS}
	if d.Timeout == 0 {
		d.Timeout = 10 * time.Second
	}
	var m sasl.Mechanism
	var err error
	switch s.SASL {
	case SASLPlain:
		m = plain.Mechanism{Username: s.User, Password: s.Password}
	case SASLScramSHA256:
		m, err = scram.Mechanism(scram.SHA256, s.User, s.Password)
	case SASLScramSHA512:
		m, err = scram.Mechanism(scram.SHA512, s.User, s.Password)
	}
	if err != nil {
		// xdg-go/scram fails only on a user or password SASLprep refuses; never echo them.
		return nil, fmt.Errorf("kafka: SASL %s: user or password not valid UTF-8 for SASLprep", s.SASL)
	}
	d.SASLMechanism = m
	return d, nil
}

// String names the protocol the way Kafka clients do, without the password:
// "PLAINTEXT", "SSL", "SASL_PLAINTEXT scram-sha-512 user slide", "SASL_SSL plain user slide".
func (s Security) String() string {
	proto := "PLAINTEXT"
	if s.TLS != nil {
		proto = "SSL"
	}
	if s.SASL == "" {
		return proto
	}
	if s.TLS != nil {
		proto = "SASL_SSL"
	} else {
		proto = "SASL_PLAINTEXT"
	}
	return proto + " " + s.SASL + " user " + s.User
}

// CheckBrokers connects to the brokers with d (nil: kafka.DefaultDialer), which performs
// the TLS handshake and the SASL exchange, and returns nil as soon as one broker accepts.
// Otherwise the error names each broker and its cause, e.g.
// "kafka 10.0.0.5:9093: SASL Authentication Failed: ..." or "... x509: certificate signed
// by unknown authority": what an operator needs to fix the flags.
func CheckBrokers(ctx context.Context, brokers []string, d *kafka.Dialer) error {
	if d == nil {
		d = kafka.DefaultDialer
	}
	var errs []string
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			// A request proves the session is usable (some brokers accept the handshake
			// and fail the first request of an unauthorized client). ApiVersions, not
			// Metadata: a metadata request for all topics slowed kfake's first group
			// join by seconds.
			_, err = conn.ApiVersions()
			conn.Close()
			if err == nil {
				return nil
			}
		}
		cause := brokerCause(err)
		if d.TLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			cause += " (the broker closed the connection: does it expect TLS?)"
		}
		errs = append(errs, "kafka "+b+": "+cause)
	}
	if len(errs) == 0 {
		return errors.New("kafka: no brokers")
	}
	return errors.New(strings.Join(errs, "; "))
}

// brokerCause shortens kafka-go's dial errors to their cause.
func brokerCause(err error) string {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Title() + ": " + ke.Description()
	}
	return err.Error()
}
