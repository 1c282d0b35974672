package textparse

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	if got := Clip("5m"); got != "5m" {
		t.Errorf("Clip(5m) = %q", got)
	}
	exact := strings.Repeat("a", MaxEcho)
	if got := Clip(exact); got != exact {
		t.Errorf("Clip of %d bytes = %q, want it whole", MaxEcho, got)
	}
	long := strings.Repeat("a", MaxEcho-1) + "é" + strings.Repeat("b", 1000) // é straddles the cut
	got := Clip(long)
	if want := strings.Repeat("a", MaxEcho-1) + "…(1065 bytes)"; got != want {
		t.Errorf("Clip(long) = %q, want %q", got, want)
	}
	if !utf8.ValidString(got) {
		t.Errorf("Clip cut a rune: %q", got)
	}
}
