package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --peer-key-file takes the file's bytes without one trailing line end, at least 32 of
// them; anything else stops serve at start, naming the flag (or SLIDE_PEER_KEY_FILE) and
// the file, before anything listens.
func TestPeerKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hex := strings.Repeat("ab", 32)
	raw := bytes.Repeat([]byte{0xff, '\n', 0}, 11)[1:33] // binary, with a newline inside
	for _, c := range []struct {
		file []byte
		want []byte // nil: refused
	}{
		{[]byte(hex + "\n"), []byte(hex)},
		{[]byte(hex + "\r\n"), []byte(hex)},
		{raw, raw},
		{[]byte(strings.Repeat("x", 32) + "\n\n"), []byte(strings.Repeat("x", 32) + "\n")},
		{[]byte(strings.Repeat("x", 31) + "\n"), nil},
		{nil, nil},
		{bytes.Repeat([]byte("x"), maxPeerKeyFile+1), nil},
	} {
		got, err := readPeerKey(write("key", c.file))
		if c.want == nil {
			if err == nil {
				t.Errorf("%d bytes: taken as a key", len(c.file))
			}
			continue
		}
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%q: %q, %v; want %q", c.file, got, err, c.want)
		}
	}
	if _, err := readPeerKey(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: no error")
	}

	short := write("short", []byte("too short\n"))
	quick := []string{"serve", "--addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0"}
	code, _, errOut := runCmd(t, context.Background(), "", append(quick, "--peer-key-file", short)...)
	if code != 1 || !strings.HasPrefix(errOut, "slide serve: --peer-key-file: ") || !strings.Contains(errOut, "9 bytes, at least 32") {
		t.Errorf("--peer-key-file with 9 bytes: exit %d, stderr:\n%s", code, errOut)
	}
	t.Setenv("SLIDE_PEER_KEY_FILE", short)
	code, _, errOut = runCmd(t, context.Background(), "", quick...)
	if code != 1 || !strings.HasPrefix(errOut, "slide serve: SLIDE_PEER_KEY_FILE="+short+": ") {
		t.Errorf("SLIDE_PEER_KEY_FILE with 9 bytes: exit %d, stderr:\n%s", code, errOut)
	}
}
