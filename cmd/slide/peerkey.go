package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/slide-metrics/slide/cluster"
)

// maxPeerKeyFile bounds --peer-key-file: a key is tens of bytes.
const maxPeerKeyFile = 64 << 10

// readPeerKey reads --peer-key-file: the group's shared key is the file's bytes with one
// trailing line end removed (a key written by `openssl rand -hex 32 > FILE` and one of 32
// raw bytes both work), at least cluster.MinPeerKeyBytes of it. Every instance of a group
// reads the same file.
func readPeerKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the peer key: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPeerKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading the peer key %s: %w", path, err)
	}
	if len(b) > maxPeerKeyFile {
		return nil, fmt.Errorf("%s is over %d KiB: not a key", path, maxPeerKeyFile>>10)
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) < cluster.MinPeerKeyBytes {
		return nil, fmt.Errorf("%s holds a key of %d bytes, at least %d are needed (make one with: openssl rand -hex 32 > %s)", path, len(b), cluster.MinPeerKeyBytes, path)
	}
	return b, nil
}
