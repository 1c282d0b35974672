package query

import (
	"net/http"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// discardWriter is a ResponseWriter that keeps one header map and drops the body, so the
// benchmark times authorize, not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkAuthorizeWrongToken refuses a wrong token of the right length that shares no
// byte (prefix0) or all but the last (prefix31) with the 32-byte token. Both sides are
// hashed before the constant-time compare, so the two must cost the same: the report's
// ratio prefix31 ÷ prefix0 should be ≈ 1. A byte-wise early-exit compare would make
// prefix31 measurably slower and leak the token a byte at a time.
func BenchmarkAuthorizeWrongToken(b *testing.B) {
	const token = "0123456789abcdef0123456789abcdef" // 32 bytes
	st, err := window.NewStore(window.StoreConfig{Ring: window.RingConfig{Slot: 10 * time.Second, Slots: 30}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Store: st, AuthToken: token, AuthReads: true})
	if err != nil {
		b.Fatal(err)
	}
	wrong := func(shared int) string {
		w := []byte(token)
		for i := shared; i < len(w); i++ {
			w[i] ^= 1 // another printable byte, same length
		}
		return string(w)
	}
	for _, c := range []struct {
		name  string
		token string
	}{
		{"prefix0", wrong(0)},
		{"prefix31", wrong(31)},
	} {
		b.Run(c.name, func(b *testing.B) {
			r, err := http.NewRequest("GET", "/v1/window?metric=m&key=k", nil)
			if err != nil {
				b.Fatal(err)
			}
			r.Header.Set("Authorization", "Bearer "+c.token)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				if s.authorize(w, r) {
					b.Fatal("a wrong token was accepted")
				}
			}
		})
	}
}
