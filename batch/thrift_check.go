package batch

import (
	"errors"
	"fmt"
)

// Parquet's footer and page headers are Thrift compact-protocol structs. parquet-go's decoder
// allocates a list of the length the input claims before reading its elements, so a 30-byte
// hostile footer claiming 2^31 row groups asks for hundreds of gigabytes. checkThrift walks
// the bytes first, without allocating: every list, set, map and string must fit in the bytes
// that are left (each element of a compact list takes at least one byte), and nesting is
// bounded. Only then does parquet-go decode them.

var errThrift = errors.New("malformed Thrift struct")

const thriftMaxDepth = 32

// errThriftShort: the struct goes on past the bytes given (the caller may retry with more).
var errThriftShort = fmt.Errorf("%w: truncated", errThrift)

// checkThrift returns the length of the compact-protocol struct at the start of b.
func checkThrift(b []byte) (int, error) {
	c := thriftChecker{b: b}
	if err := c.structure(0); err != nil {
		return 0, err
	}
	return c.i, nil
}

type thriftChecker struct {
	b []byte
	i int
}

func (c *thriftChecker) byte1() (byte, error) {
	if c.i >= len(c.b) {
		return 0, errThriftShort
	}
	x := c.b[c.i]
	c.i++
	return x, nil
}

func (c *thriftChecker) varint() (uint64, error) {
	var x uint64
	for shift := 0; shift < 64; shift += 7 {
		b, err := c.byte1()
		if err != nil {
			return 0, err
		}
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%w: varint too long", errThrift)
}

func (c *thriftChecker) skip(n uint64) error {
	if n > uint64(len(c.b)-c.i) {
		return errThriftShort
	}
	c.i += int(n)
	return nil
}

func (c *thriftChecker) structure(depth int) error {
	if depth > thriftMaxDepth {
		return fmt.Errorf("%w: nested too deep", errThrift)
	}
	for {
		h, err := c.byte1()
		if err != nil {
			return err
		}
		if h == 0 { // stop
			return nil
		}
		if h>>4 == 0 { // long form: the field id follows
			if _, err := c.varint(); err != nil {
				return err
			}
		}
		if err := c.value(h&0x0f, depth); err != nil {
			return err
		}
	}
}

// count reads a collection's size and checks that its elements can fit in what is left.
func (c *thriftChecker) count(n uint64) error {
	if n > uint64(len(c.b)-c.i) {
		return fmt.Errorf("%w: a collection of %d elements in %d bytes", errThrift, n, len(c.b)-c.i)
	}
	return nil
}

func (c *thriftChecker) value(t byte, depth int) error {
	switch t {
	case 1, 2: // boolean true/false: in the field header
		return nil
	case 3: // byte
		return c.skip(1)
	case 4, 5, 6: // i16, i32, i64
		_, err := c.varint()
		return err
	case 7: // double
		return c.skip(8)
	case 8: // binary
		n, err := c.varint()
		if err != nil {
			return err
		}
		return c.skip(n)
	case 9, 10: // list, set
		h, err := c.byte1()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = c.varint(); err != nil {
				return err
			}
		}
		if err := c.count(n); err != nil {
			return err
		}
		et := h & 0x0f
		for k := uint64(0); k < n; k++ {
			if et == 1 || et == 2 { // booleans in a list take one byte each
				if err := c.skip(1); err != nil {
					return err
				}
				continue
			}
			if err := c.value(et, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 11: // map
		n, err := c.varint()
		if err != nil || n == 0 {
			return err
		}
		if err := c.count(n); err != nil {
			return err
		}
		kv, err := c.byte1()
		if err != nil {
			return err
		}
		for k := uint64(0); k < n; k++ {
			for _, et := range []byte{kv >> 4, kv & 0x0f} {
				if et == 1 || et == 2 {
					if err := c.skip(1); err != nil {
						return err
					}
				} else if err := c.value(et, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	case 12: // struct
		return c.structure(depth + 1)
	case 13: // uuid
		return c.skip(16)
	}
	return fmt.Errorf("%w: unknown type %d", errThrift, t)
}
