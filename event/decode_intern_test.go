package event

import (
	"fmt"
	"strings"
	"testing"
)

// TestInternTable: names are found once added (short ones by their words, long ones by
// maphash), the table never holds more than its bound, the plain flag says whether a name is
// its own JSON text, and an insert that would probe too far clears the table and draws a
// new key instead of making lookups slow.
func TestInternTable(t *testing.T) {
	tab := newInternTable(100)
	var names []string
	for i := range 1000 {
		name := fmt.Sprintf("tenant-%d", i)
		if i%3 == 0 {
			name = strings.Repeat("long-", 5) + name // more than 16 bytes
		}
		names = append(names, name)
		if _, _, ok := tab.lookup([]byte(name)); ok {
			t.Fatalf("%q found before it was added", name)
		}
		_, h, _ := tab.lookup([]byte(name))
		if v := tab.add([]byte(name), h); v != name {
			t.Fatalf("add(%q) = %q", name, v)
		}
		if v, _, ok := tab.lookup([]byte(name)); !ok || v != name {
			t.Fatalf("%q not found after add: %q %v", name, v, ok)
		}
		if tab.n > 100 || len(tab.slots) > 256 {
			t.Fatalf("after %d names: %d held in %d slots, bound 100", i+1, tab.n, len(tab.slots))
		}
	}
	// The last names added since the last clear are all there.
	for _, name := range names[len(names)-tab.n:] {
		if _, _, ok := tab.lookup([]byte(name)); !ok {
			t.Errorf("%q lost", name)
		}
	}
	for name, plain := range map[string]bool{"tenant-42": true, "a b": true, `a"b`: false, `a\b`: false, "t\u00e9": false, "a\x7f": false} {
		_, h, _ := tab.lookup([]byte(name))
		tab.add([]byte(name), h)
		lo, hi := words16([]byte(name))
		if v, _, ok, p := tab.lookupShort(lo, hi, len(name)); !ok || v != name || p != plain {
			t.Errorf("%q: lookupShort %q %v plain %v, want plain %v", name, v, ok, p, plain)
		}
	}

	// A probe run longer than maxProbe: fill every slot, as colliding names would.
	full := newInternTable(1 << 20)
	for i := range full.slots {
		full.slots[i] = internSlot{s: "x"}
	}
	full.n = 1 // the table believes it has room
	k0 := full.k0
	_, h, _ := full.lookup([]byte("tenant-1"))
	full.add([]byte("tenant-1"), h)
	if full.n != 1 || full.k0 == k0 {
		t.Fatalf("after a failed insert: %d names, key changed %v; want the table cleared and rekeyed", full.n, full.k0 != k0)
	}
	if v, _, ok := full.lookup([]byte("tenant-1")); !ok || v != "tenant-1" {
		t.Fatalf("tenant-1 not found after the rekey: %q %v", v, ok)
	}
}

// TestDecodeFastCache: the metric cache and the plain flag never let a name that came
// escaped stand for raw bytes that mean something else.
func TestDecodeFastCache(t *testing.T) {
	d := newTestDecoder(t)
	for _, c := range []struct {
		line string
		want Reason
		key  string
	}{
		{`{"ts":1,"key":"a\\b","metric":"a\\b","value":1}`, ReasonNone, `a\b`}, // interned, not plain
		{`{"ts":1,"key":"a\b","metric":"a\\b","value":1}`, ReasonBadField, ""}, // raw `a\b` is a\x08: refused
		{`{"ts":1,"key":"k","metric":"a\b","value":1}`, ReasonBadField, ""},    // nor the metric cache
		{`{"ts":1,"key":"tenant-42","metric":"latency_ms","value":1}`, ReasonNone, "tenant-42"},
		{`{"ts":1,"key":"tenant-42","metric":"latency_ms\u0000","value":1}`, ReasonBadField, ""}, // the cached metric, then more
		{`{"ts":1,"key":"tenant-42","metric":"latency_m","value":1}`, ReasonNone, "tenant-42"},
	} {
		for range 2 {
			ev, r := d.Decode([]byte(c.line), defTS)
			if r != c.want || ev.Key != c.key {
				t.Errorf("%s: %q %v, want %q %v", c.line, ev.Key, r, c.key, c.want)
			}
			if _, gr := newTestDecoder(t).decodeGeneral([]byte(c.line), defTS); gr != r {
				t.Errorf("%s: %v, the general path %v", c.line, r, gr)
			}
		}
	}
}
