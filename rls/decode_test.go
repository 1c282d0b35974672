package rls

import (
	"bytes"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzDecodeLenient: whatever protobuf decodes, decodeLenient decodes to the
// same request; what it decodes beyond that differs only in strings that are
// not UTF-8 (it never panics). Seeded with requests of every field, and the
// same with a value made Latin-1.
func FuzzDecodeLenient(f *testing.F) {
	full := &pb.RateLimitRequest{Domain: "shop", HitsAddend: 3, Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}, {Key: "path", Value: "caf\x01"}},
			HitsAddend: wrapperspb.UInt64(7), IsNegativeHits: true},
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "client_id"}},
			Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_HOUR}},
		{},
	}}
	b, err := proto.Marshal(full)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	latin1 := bytes.ReplaceAll(b, []byte("caf\x01"), []byte("caf\xe9"))
	f.Add(latin1)
	got, err := decodeLenient(latin1)
	if err != nil {
		f.Fatal(err)
	}
	full.Descriptors[0].Entries[1].Value = "caf\xe9"
	if !equalRequests(got, full) {
		f.Fatalf("Latin-1 value: decoded %v, want %v", got, full)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lenient, lerr := decodeLenient(data)
		var strict pb.RateLimitRequest
		if proto.Unmarshal(data, &strict) != nil {
			return
		}
		if lerr != nil || !equalRequests(lenient, &strict) {
			t.Fatalf("protobuf decodes %v, decodeLenient %v, %v", &strict, lenient, lerr)
		}
	})
}

// equalRequests is proto.Equal, which compares strings byte for byte (valid
// UTF-8 or not) but not unknown fields the two decoders keep in other order.
func equalRequests(a, b *pb.RateLimitRequest) bool {
	a, b = proto.Clone(a).(*pb.RateLimitRequest), proto.Clone(b).(*pb.RateLimitRequest)
	for _, r := range []*pb.RateLimitRequest{a, b} {
		r.ProtoReflect().SetUnknown(nil)
		for _, d := range r.GetDescriptors() {
			d.ProtoReflect().SetUnknown(nil)
			for _, e := range d.GetEntries() {
				e.ProtoReflect().SetUnknown(nil)
			}
		}
	}
	return proto.Equal(a, b)
}
