package ingest

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/tlstest"
)

// The consumer and the dead-letter writer through TLS, SASL (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512) and both, against the embedded broker so configured: events produced by
// a separate client are counted exactly, refused ones reach the dead-letter topic.
func TestSecureBrokers(t *testing.T) {
	ca := tlstest.NewCA(t, "kafka")
	client := ca.Client("slide")
	for _, tc := range []struct {
		name   string
		server kafkatest.Opts
		sec    Security
	}{
		{"tls", kafkatest.Opts{TLS: ca.ServerTLS(nil)}, Security{TLS: &tls.Config{RootCAs: ca.Pool}}},
		{"mtls", kafkatest.Opts{TLS: ca.ServerTLS(ca.Pool)},
			Security{TLS: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{client.Cert}}}},
		{"sasl plain", kafkatest.Opts{Users: []kafkatest.User{{Method: "PLAIN", Name: "slide", Password: "pw-plain"}}},
			Security{SASL: SASLPlain, User: "slide", Password: "pw-plain"}},
		{"sasl scram-sha-256", kafkatest.Opts{Users: []kafkatest.User{{Method: "SCRAM-SHA-256", Name: "slide", Password: "pw-256"}}},
			Security{SASL: SASLScramSHA256, User: "slide", Password: "pw-256"}},
		{"sasl_ssl scram-sha-512", kafkatest.Opts{TLS: ca.ServerTLS(nil), Users: []kafkatest.User{{Method: "SCRAM-SHA-512", Name: "slide", Password: "pw-512"}}},
			Security{TLS: &tls.Config{RootCAs: ca.Pool}, SASL: SASLScramSHA512, User: "slide", Password: "pw-512"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := tc.sec.Dialer()
			if err != nil {
				t.Fatal(err)
			}
			tc.server.Dialer = d
			c := kafkatest.StartWith(t, tc.server, "events", 2, "events-dlq")
			if err := CheckBrokers(context.Background(), []string{c.Addr}, d); err != nil {
				t.Fatalf("CheckBrokers: %v", err)
			}
			t0 := time.Now()
			rng := rand.New(rand.NewPCG(2, 2))
			evs := genEvents(rng, t0, 300, 10)
			sortByKey(evs)
			msgs := records(rng, evs)
			msgs = append(msgs, msgs[0])
			msgs[len(msgs)-1].Value = []byte("not json\n")
			c.Produce(t, msgs...)

			store := newTestStore(t, 0)
			cfg := testConfig(c, "secure")
			cfg.Dialer = d
			cfg.DeadLetterTopic = "events-dlq"
			r := start(t, cfg, store, t0)
			eventually(t, 15*time.Second, "the events over "+tc.sec.String(), func() bool { return caughtUp(t, c, r) }, progress(r))
			checkOracle(t, store, t0, evs)
			eventually(t, 10*time.Second, "the dead letter", func() bool { return logEnd(t, c, "events-dlq")[0]+logEnd(t, c, "events-dlq")[1] == 1 })
		})
	}
}

// A wrong password, a wrong mechanism, an untrusted certificate, a missing client
// certificate and plaintext against TLS each fail the check with the cause named, and no
// password in the message.
func TestCheckBrokersFailures(t *testing.T) {
	ca := tlstest.NewCA(t, "kafka")
	other := tlstest.NewCA(t, "other")
	users := []kafkatest.User{{Method: "SCRAM-SHA-512", Name: "slide", Password: "right-pw"}}
	tlsBroker := kafkatest.StartWith(t, kafkatest.Opts{TLS: ca.ServerTLS(nil), Users: users}, "events", 1)
	mtlsBroker := kafkatest.StartWith(t, kafkatest.Opts{TLS: ca.ServerTLS(ca.Pool)}, "events", 1)
	for _, tc := range []struct {
		name, addr string
		sec        Security
		want       string
	}{
		{"wrong password", tlsBroker.Addr, Security{TLS: &tls.Config{RootCAs: ca.Pool}, SASL: SASLScramSHA512, User: "slide", Password: "wrong-pw"}, "SASL"},
		{"unknown user", tlsBroker.Addr, Security{TLS: &tls.Config{RootCAs: ca.Pool}, SASL: SASLScramSHA512, User: "nobody", Password: "wrong-pw"}, "SASL"},
		{"wrong mechanism", tlsBroker.Addr, Security{TLS: &tls.Config{RootCAs: ca.Pool}, SASL: SASLPlain, User: "slide", Password: "wrong-pw"}, "SASL"},
		{"untrusted certificate", tlsBroker.Addr, Security{TLS: &tls.Config{RootCAs: other.Pool}, SASL: SASLScramSHA512, User: "slide", Password: "wrong-pw"}, "certificate"},
		{"no client certificate", mtlsBroker.Addr, Security{TLS: &tls.Config{RootCAs: ca.Pool}}, "certificate"},
		{"plaintext against tls", mtlsBroker.Addr, Security{DialTimeout: 2 * time.Second}, "kafka " + mtlsBroker.Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.sec.Dialer()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = CheckBrokers(ctx, []string{tc.addr}, d)
			t.Logf("%s: %v", tc.name, err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "kafka "+tc.addr+": ") {
				t.Fatalf("CheckBrokers = %v, want an error starting %q containing %q", err, "kafka "+tc.addr+": ", tc.want)
			}
			if strings.Contains(err.Error(), "wrong-pw") || strings.Contains(err.Error(), "right-pw") {
				t.Errorf("error contains a password: %v", err)
			}
		})
	}
}

func TestSecurityValidate(t *testing.T) {
	for _, tc := range []struct {
		sec  Security
		want string
	}{
		{Security{SASL: "gssapi", User: "u", Password: "p"}, "want plain"},
		{Security{SASL: SASLPlain, Password: "p"}, "needs a user"},
		{Security{SASL: SASLScramSHA256, User: "u"}, "needs a password"},
		{Security{User: "u"}, "without a SASL mechanism"},
	} {
		if err := tc.sec.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.sec, err, tc.want)
		}
		if _, err := tc.sec.Dialer(); err == nil {
			t.Errorf("Dialer(%+v) succeeded where Validate failed", tc.sec)
		}
	}
	s := Security{TLS: &tls.Config{}, SASL: SASLScramSHA512, User: "slide", Password: "hunter2"}
	if got := s.String(); got != "SASL_SSL scram-sha-512 user slide" {
		t.Errorf("String() = %q", got)
	}
	if (Security{}).String() != "PLAINTEXT" || (Security{TLS: &tls.Config{}}).String() != "SSL" {
		t.Error("String of TLS-less or SASL-less security is wrong")
	}
}
