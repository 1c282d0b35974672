package ingest

// The snapshot topic's record formats: chunks and the manifest that completes them.

import (
	"encoding/binary"
	"hash/crc32"
)

// Record formats. A snapshot of (group, partition) is its chunks, then one manifest that
// makes it complete. Keys: the manifest "<group>/<partition>", chunk i
// "<group>/<partition>/<a|b>/<i>". Snapshots alternate between the a and b chunk sets, so a
// crash while writing one never overwrites the chunks the latest complete manifest names,
// and compaction keeps exactly one manifest and at most two chunk sets per key.
//
// Manifest version 2 adds, before the payload's CRC, the payload's codec (codecNone or
// codecZstd: the chunks carry the window snapshot zstd-compressed) and its decoded size;
// version 1 manifests (uncompressed) are still read. Chunks are version 1 either way.
const (
	snapRecordVersion = 1 // chunks, and the oldest manifest read
	manifestVersion   = 2 // manifests written
	manifestLen       = 4 + 1 + 8 + 1 + 3*binary.MaxVarintLen64 + 2*binary.MaxVarintLen64 + 1 + binary.MaxVarintLen64 + 4 + 4

	codecNone byte = 0
	codecZstd byte = 1
	// maxInflation bounds a compressed payload's declared decoded size: a window snapshot
	// compresses about 5:1 (measured: an hour of 1,000 cost series), never near this.
	maxInflation = 256
)

var (
	manifestMagic = [4]byte{'S', 'L', 'S', 'M'}
	chunkMagic    = [4]byte{'S', 'L', 'S', 'C'}
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
)

// manifest describes one complete snapshot.
type manifest struct {
	id     uint64 // random, tells this snapshot's chunks from another's
	set    byte   // 'a' or 'b'
	offset int64  // next offset of the source partition the snapshot covers
	taken  int64  // wall clock at the snapshot, unix ms
	chunks uint64
	size   uint64 // payload bytes over all chunks
	codec  byte   // codecNone or codecZstd
	raw    uint64 // the payload's decoded size (size when codecNone)
	crc    uint32 // CRC-32C of the payload
}

func (m manifest) append(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, manifestMagic[:]...)
	dst = append(dst, manifestVersion)
	dst = binary.LittleEndian.AppendUint64(dst, m.id)
	dst = append(dst, m.set)
	dst = binary.AppendVarint(dst, m.offset)
	dst = binary.AppendVarint(dst, m.taken)
	dst = binary.AppendUvarint(dst, m.chunks)
	dst = binary.AppendUvarint(dst, m.size)
	dst = append(dst, m.codec)
	dst = binary.AppendUvarint(dst, m.raw)
	dst = binary.LittleEndian.AppendUint32(dst, m.crc)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// parseManifest returns the manifest in v, or the reason it cannot be used.
func parseManifest(v []byte) (manifest, string) {
	var m manifest
	if len(v) < 5 || [4]byte(v[:4]) != manifestMagic {
		return m, reasonCorrupt
	}
	version := v[4]
	if version != snapRecordVersion && version != manifestVersion {
		return m, reasonUnknownVersion
	}
	if len(v) < 5+8+1+4+4 || len(v) > manifestLen {
		return m, reasonCorrupt
	}
	body := v[:len(v)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(v[len(v)-4:]) {
		return m, reasonCorrupt
	}
	p := body[5:]
	m.id, m.set, p = binary.LittleEndian.Uint64(p), p[8], p[9:]
	var ok bool
	read := func(signed bool) uint64 {
		var x uint64
		var n int
		if signed {
			var s int64
			s, n = binary.Varint(p)
			x = uint64(s)
		} else {
			x, n = binary.Uvarint(p)
		}
		if n <= 0 {
			ok = false
			return 0
		}
		p = p[n:]
		return x
	}
	ok = true
	m.offset, m.taken = int64(read(true)), int64(read(true))
	m.chunks, m.size = read(false), read(false)
	m.codec, m.raw = codecNone, m.size
	if version == manifestVersion && ok && len(p) > 0 {
		m.codec, p = p[0], p[1:]
		m.raw = read(false)
	}
	if !ok || len(p) != 4 || (m.set != 'a' && m.set != 'b') || m.offset < 0 || m.chunks == 0 || m.chunks > 1<<20 {
		return m, reasonCorrupt
	}
	switch {
	case version == manifestVersion && m.codec == codecNone && m.raw == m.size:
	case version == manifestVersion && m.codec == codecZstd && m.size < 1<<48 && m.raw <= m.size*maxInflation:
	case version == snapRecordVersion:
	default:
		return m, reasonCorrupt
	}
	m.crc = binary.LittleEndian.Uint32(p)
	return m, ""
}

// chunkHeaderLen is the most bytes a chunk's header takes.
const chunkHeaderLen = 4 + 1 + 8 + binary.MaxVarintLen64

func appendChunkHeader(v []byte, id uint64, i int) []byte {
	v = append(v, chunkMagic[:]...)
	v = append(v, snapRecordVersion)
	v = binary.LittleEndian.AppendUint64(v, id)
	return binary.AppendUvarint(v, uint64(i))
}

// chunker cuts a snapshot's payload into the values of its chunk records as it is written
// (the compressor writes into it), keeping the payload's size and CRC, so a snapshot is
// held once, compressed, in the records that carry it: never whole before it is cut.
type chunker struct {
	id     uint64
	size   int      // payload bytes a chunk carries (SnapshotConfig.ChunkBytes)
	chunks [][]byte // record values, each a header and up to size bytes of payload
	fill   int      // payload bytes in the last chunk
	total  int64
	crc    uint32
	stop   func() error // when it returns an error, Write fails with it (a final snapshot's deadline)
}

func (c *chunker) Write(p []byte) (int, error) {
	if c.stop != nil {
		if err := c.stop(); err != nil {
			return 0, err
		}
	}
	c.crc = crc32.Update(c.crc, castagnoli, p)
	c.total += int64(len(p))
	n := len(p)
	for len(p) > 0 {
		if len(c.chunks) == 0 || c.fill == c.size {
			// The first chunk starts small (most snapshots are), the next whole: a chunk is
			// allocated at most twice, never grown by append's steps.
			room := c.size
			if len(c.chunks) == 0 {
				room = min(c.size, 4<<10)
			}
			c.chunks = append(c.chunks, appendChunkHeader(make([]byte, 0, chunkHeaderLen+room), c.id, len(c.chunks)))
			c.fill = 0
		}
		last := &c.chunks[len(c.chunks)-1]
		k := min(len(p), c.size-c.fill)
		if len(*last)+k > cap(*last) {
			*last = append(make([]byte, 0, chunkHeaderLen+c.size), *last...)
		}
		*last = append(*last, p[:k]...)
		c.fill += k
		p = p[k:]
	}
	return n, nil
}

// values returns the chunk record values: at least one, empty for an empty payload.
func (c *chunker) values() [][]byte {
	if len(c.chunks) == 0 {
		c.chunks = append(c.chunks, appendChunkHeader(nil, c.id, 0))
	}
	return c.chunks
}

// parseChunk returns a chunk's snapshot id, index and data, or a reason.
func parseChunk(v []byte) (id, i uint64, data []byte, reason string) {
	if len(v) < 5 || [4]byte(v[:4]) != chunkMagic {
		return 0, 0, nil, reasonCorrupt
	}
	if v[4] != snapRecordVersion {
		return 0, 0, nil, reasonUnknownVersion
	}
	if len(v) < 14 {
		return 0, 0, nil, reasonCorrupt
	}
	id = binary.LittleEndian.Uint64(v[5:])
	i, n := binary.Uvarint(v[13:])
	if n <= 0 {
		return 0, 0, nil, reasonCorrupt
	}
	return id, i, v[13+n:], ""
}
