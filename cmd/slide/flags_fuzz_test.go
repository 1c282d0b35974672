package main

import (
	"errors"
	"strings"
	"testing"
)

// FuzzServeFlags parses arbitrary command lines and SLIDE_SLOTS/SLIDE_RINGS values with
// serve's flags and checks: no panic, and every refusal is a usage error of one line (a
// value holding a newline is quoted), so run prints exactly one line and the --help pointer.
func FuzzServeFlags(f *testing.F) {
	for _, seed := range []struct{ args, slots, rings string }{
		{"--slots\x000", "", ""},
		{"--bogus", "", ""},
		{"--slot\x0010", "abc", ""},
		{"--rings\x00cost=1m:60:tdigest", "", "cost=1m"},
		{"--demo=maybe\x00--addr", "", ""},
		{"--max-conns-per-client\x00-1\x00--sketch\x00hdr:9", "30", "x=1s:1"},
		{"-bo\ngus", "3\n0", "a=\n"},
		{"--max-memory\x001KiB\x00--max-series\x003", "", ""},
		{"--max-memory\x002 parsecs", "", ""},
		{"--rings\x00tokens=10s:360+1h:24+1d:32,cost=1m:60:none+1h:48+1d:36", "", "x=10s:30+7s:10"},
		{"--rings\x00x=1m:60+1h:0+", "", "x=1d:1:none+2d:2"},
	} {
		f.Add(seed.args, seed.slots, seed.rings)
	}
	f.Fuzz(func(t *testing.T, args, slots, rings string) {
		env := map[string]string{"SLIDE_SLOTS": slots, "SLIDE_RINGS": rings}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok && v != "" }
		fs := newFlagSet("serve", discard{})
		var c serveConfig
		c.register(fs)
		err := parseFlagsEnv(fs, strings.Split(args, "\x00"), lookup)
		if err == nil {
			err = c.validate(fs)
		}
		if err == nil || errors.Is(err, errHelp) {
			return
		}
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Fatalf("%q: %v is not a usage error", args, err)
		}
		if strings.ContainsAny(ue.msg, "\n\r") {
			t.Fatalf("%q: the usage error spans lines: %q", args, ue.msg)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
