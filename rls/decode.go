package rls

import (
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Envoy copies request bytes into descriptor entries as they are: a header
// value may hold obs-text (a Latin-1 user agent, a stray 0xff), and Envoy's
// C++ protobuf writes such a string unchecked. protobuf-go refuses the whole
// message for it, and a refused request is decided by Envoy's
// failure_mode_deny: with false, one such byte in one header skipped every
// limit of the request. So a request that fails to decode is decoded again
// by decodeLenient, which keeps the strings' bytes as they are: a value that
// is no UTF-8 is a value of its own (limiterKey hashes it), a key that is
// matches nothing. Only the strings are read here; every other field
// (hits_addend, the limit override, is_negative_hits) goes through protobuf.

// decodeLenient decodes a RateLimitRequest as proto.Unmarshal does, except
// that domain, key and value need not be UTF-8.
func decodeLenient(b []byte) (*pb.RateLimitRequest, error) {
	r := new(pb.RateLimitRequest)
	rest, err := eachField(b, func(num protowire.Number, v []byte) (bool, error) {
		switch num {
		case 1:
			r.Domain = string(v)
		case 2:
			d, err := decodeDescriptor(v)
			if err != nil {
				return true, err
			}
			r.Descriptors = append(r.Descriptors, d)
		default:
			return false, nil
		}
		return true, nil
	}, 1, 2)
	if err != nil {
		return nil, err
	}
	return r, proto.UnmarshalOptions{Merge: true}.Unmarshal(rest, r)
}

func decodeDescriptor(b []byte) (*rlv3.RateLimitDescriptor, error) {
	d := new(rlv3.RateLimitDescriptor)
	rest, err := eachField(b, func(_ protowire.Number, v []byte) (bool, error) {
		e := new(rlv3.RateLimitDescriptor_Entry)
		_, err := eachField(v, func(num protowire.Number, s []byte) (bool, error) {
			if num == 1 {
				e.Key = string(s)
			} else {
				e.Value = string(s)
			}
			return true, nil
		}, 1, 2)
		d.Entries = append(d.Entries, e)
		return true, err
	}, 1)
	if err != nil {
		return nil, err
	}
	return d, proto.UnmarshalOptions{Merge: true}.Unmarshal(rest, d)
}

// eachField walks the fields of message b, handing those numbered in lenient
// (length-delimited) to f, and returns the others, as they were, for
// protobuf; f reports whether it took the field.
func eachField(b []byte, f func(protowire.Number, []byte) (bool, error), lenient ...protowire.Number) ([]byte, error) {
	var rest []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		field := b[:n+m]
		b = b[n+m:]
		isLenient := false
		for _, l := range lenient {
			isLenient = isLenient || l == num
		}
		if !isLenient || typ != protowire.BytesType {
			rest = append(rest, field...) // another wire type: an unknown field to protobuf too
			continue
		}
		v, _ := protowire.ConsumeBytes(field[n:])
		if took, err := f(num, v); err != nil {
			return nil, err
		} else if !took {
			rest = append(rest, field...)
		}
	}
	return rest, nil
}
