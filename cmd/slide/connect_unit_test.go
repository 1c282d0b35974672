package main

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// Kafka gates readiness until its first good check only; Redis never does.
func TestBackendGating(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k := &backend{name: "kafka", addr: "k:9093", gates: true}
	r := &backend{name: "redis", addr: "r:6379"}
	bs := backends{r, k}
	if err := bs.failing(); err != nil {
		t.Fatalf("unchecked backends gate: %v", err)
	}
	k.set(errors.New("SASL Authentication Failed"), log)
	r.set(errors.New("WRONGPASS"), log)
	if err := bs.failing(); err == nil || err.Error() != "kafka k:9093: SASL Authentication Failed" {
		t.Fatalf("failing() = %v, want Kafka's refusal", err)
	}
	k.set(nil, log)
	k.set(errors.New("dial tcp: connection refused"), log)
	if err := bs.failing(); err != nil {
		t.Errorf("a Kafka outage after a good check gates readiness: %v", err)
	}
	st := bs.states()
	if st[0].State != "failing" || !strings.HasPrefix(st[0].Error, "redis r:6379: WRONGPASS") || st[1].State != "failing" {
		t.Errorf("states %+v", st)
	}
}

// Secret and CA files are read up to a bound: a wrong path (/dev/zero never ends) is refused
// at once instead of filling memory.
func TestSmallFilesAreBounded(t *testing.T) {
	if _, err := readSecretFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: larger than 64 KiB") {
		t.Errorf("secret file /dev/zero: %v", err)
	}
	if _, err := loadCAs("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: larger than 4096 KiB") {
		t.Errorf("CA file /dev/zero: %v", err)
	}
}
