package window

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// refusedRune is ValidName's rule for one code point, written from its definition:
// Unicode's Cc category (C0, DEL, C1) and the bidi overrides and isolates.
func refusedRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// TestValidNameEveryRune holds ValidName to its definition for every code point, alone and
// between printable ASCII (the fast path hands over at the first other byte), and as bytes.
func TestValidNameEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		for _, s := range []string{string(r), "k-" + string(r), string(r) + "-k", "é" + string(r) + "é"} {
			if got, want := ValidName(s), !refusedRune(r); got != want {
				t.Fatalf("ValidName(%+q) = %v, want %v", s, got, want)
			}
			if ValidNameBytes([]byte(s)) != ValidName(s) {
				t.Fatalf("ValidNameBytes(%+q) differs from ValidName", s)
			}
		}
	}
}

func TestValidName(t *testing.T) {
	for _, c := range []struct {
		s  string
		ok bool
	}{
		{"tenant-42", true},
		{"latency_ms", true},
		{"a b~{}|", true},
		{"té日本\U0001F600", true},
		{strings.Repeat("k", 100_000), true}, // length is each door's own check
		{"", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\tb", false},
		{"\x1b[31mred", false},
		{"a\x7f", false},
		{"csi\u009b31m", false},
		{"\u0085next-line", false},
		{"rlo\u202eexe.txt", false},
		{"lri\u2066x\u2069", false},
		{"t\xff", false},                     // invalid UTF-8
		{"t\xc2", false},                     // truncated
		{"t\xe2\x80", false},                 // truncated before a bidi override's last byte
		{"\xed\xa0\x80", false},              // a surrogate
		{"\xc0\x80", false},                  // overlong NUL
		{"\xe0\x80\xaf", false},              // overlong '/'
		{"\xf4\x90\x80\x80", false},          // past U+10FFFF
		{"ok\u00a0\u202f\u2065\u206a", true}, // the neighbours of C1 and of the bidi ranges
	} {
		if got := ValidName(c.s); got != c.ok {
			t.Errorf("ValidName(%+q) = %v, want %v", c.s, got, c.ok)
		}
	}
}

func TestValidNameAllocatesNothing(t *testing.T) {
	b := []byte("tenant-\u00e9-42")
	if n := testing.AllocsPerRun(100, func() { _ = ValidNameBytes(b) || ValidName("tenant-42") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// BenchmarkValidName is the rule's cost on a usual ASCII key and on one with a non-ASCII
// letter (the slow path), against limiter.ValidateKey's byte loop before it (before), which
// refused less: run both side by side.
func BenchmarkValidName(b *testing.B) {
	for _, c := range []struct{ name, s string }{{"ascii", "tenant-000042"}, {"accent", "tenant-\u00e9-000042"}} {
		for _, f := range []struct {
			name string
			fn   func(string) bool
		}{{"ours", ValidName}, {"before", oldValidateKey}} {
			b.Run(c.name+"/"+f.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if !f.fn(c.s) {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}

// oldValidateKey is limiter.ValidateKey's loop before ValidName.
func oldValidateKey(key string) bool {
	ascii := true
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < 0x20 || c == 0x7f {
			return false
		}
		ascii = ascii && c < 0x80
	}
	return ascii || utf8.ValidString(key)
}
