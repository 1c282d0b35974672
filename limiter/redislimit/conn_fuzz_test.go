package redislimit_test

import (
	"strings"
	"testing"

	"github.com/slide-metrics/slide/limiter/redislimit"
)

// FuzzConnRedacts: whatever follows the credentials of a --redis URL, Validate, String and
// Redact never panic and never show the password.
func FuzzConnRedacts(f *testing.F) {
	for _, s := range []string{"127.0.0.1:6379", "h:1/0", "h:1/x", "h:bad", "[::1]:6379/2", "h:1/0?pool_size=3", "h:1#f", "@h:1", "h%zz:1", ""} {
		f.Add(s)
	}
	const secret = "S3CR3T-pw"
	f.Fuzz(func(t *testing.T, rest string) {
		if strings.Contains(rest, secret) || strings.Contains(rest, "S3CR3T") {
			return
		}
		for _, scheme := range []string{"redis://", "rediss://", ""} {
			c := redislimit.Conn{Addr: scheme + "slide:" + secret + "@" + rest}
			out := []string{c.String(), redislimit.Redact(c.Addr)}
			if err := c.Validate(); err != nil {
				out = append(out, err.Error())
			}
			for _, s := range out {
				if strings.Contains(s, "S3CR3T") {
					t.Fatalf("%q shows the password: %q", c.Addr, s)
				}
			}
		}
	})
}
