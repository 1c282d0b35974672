package rls_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/slide-metrics/slide/rls"
)

// nonUTF8 encodes r and then swaps each old for its new, of the same length,
// so a request can carry strings a Go client refuses to encode: what Envoy
// sends when a header it copies into a descriptor holds bytes that are not
// UTF-8 (obs-text, a Latin-1 user agent; its C++ protobuf writes them as they are).
func nonUTF8(t *testing.T, r *pb.RateLimitRequest, oldnew ...string) rawMsg {
	t.Helper()
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(oldnew); i += 2 {
		if len(oldnew[i]) != len(oldnew[i+1]) || !bytes.Contains(b, []byte(oldnew[i])) {
			t.Fatalf("cannot swap %q for %q", oldnew[i], oldnew[i+1])
		}
		b = bytes.ReplaceAll(b, []byte(oldnew[i]), []byte(oldnew[i+1]))
	}
	return rawMsg(b)
}

// TestNonUTF8ValuesAreDecided: a descriptor value that is not UTF-8 is a value
// like any other (its own counter), and the request's other descriptors are
// decided with it. Such requests were refused as malformed, so with Envoy's
// failure_mode_deny: false one byte 0xff in a header skipped every limit of
// the request, the per-address one beside it included.
func TestNonUTF8ValuesAreDecided(t *testing.T) {
	h := start(t, setup{cfg: loadTestConfig(t, rls.LoadOptions{})})
	call := func(in rawMsg) *pb.RateLimitResponse {
		t.Helper()
		out := new(pb.RateLimitResponse)
		var raw rawMsg
		if err := h.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &in, &raw, rawCodecOption()); err != nil {
			t.Fatalf("request %q: %v", in, err)
		}
		if err := proto.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// client_id=hot spends its 20 a minute.
	h.call(t, req("shop", 20, desc("client_id", "hot")))
	r := req("shop", 0, desc("client_id", "cafe\x01"), desc("client_id", "hot"))
	r.Descriptors[0].HitsAddend = wrapperspb.UInt64(2)
	resp := call(nonUTF8(t, r, "cafe\x01", "cafe\xe9"))
	if resp.GetOverallCode() != over || resp.GetStatuses()[1].GetCode() != over {
		t.Errorf("beside an over-limit descriptor: %v, want OVER_LIMIT", resp)
	}
	if st := resp.GetStatuses()[0]; st.GetCode() != ok || st.GetCurrentLimit().GetRequestsPerUnit() != 20 || st.GetLimitRemaining() != 18 {
		t.Errorf("the Latin-1 value with hits_addend 2: %v, want OK, 18 of 20 left", st)
	}
	one := req("shop", 0, desc("client_id", "cafe\x01"))
	if st := call(nonUTF8(t, one, "cafe\x01", "cafe\xe9")).GetStatuses()[0]; st.GetLimitRemaining() != 17 {
		t.Errorf("the same bytes again: %v, want 17 left (one counter)", st)
	}
	if st := call(nonUTF8(t, one, "cafe\x01", "cafe\xe8")).GetStatuses()[0]; st.GetLimitRemaining() != 19 {
		t.Errorf("other bytes: %v, want 19 left (a counter of their own)", st)
	}
	if st := call(nonUTF8(t, req("shop", 0, desc("client\x01", "a")), "client\x01", "client\xff")).GetStatuses()[0]; st.GetCode() != ok || st.GetCurrentLimit() != nil {
		t.Errorf("a key that is not UTF-8: %v, want OK without a limit (no descriptor has it)", st)
	}
	in := nonUTF8(t, req("sh\x01p", 0, desc("client_id", "a")), "sh\x01p", "sh\xffp")
	err := h.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &in, new(rawMsg), rawCodecOption())
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "domain is not valid UTF-8") {
		t.Errorf("a domain that is not UTF-8: %v, want InvalidArgument (a domain is configuration, never a header)", err)
	}
}
