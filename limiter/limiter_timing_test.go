package limiter

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// BenchmarkTokenBucketMemory compares one memory token-bucket decision for an
// existing key (hash, shard lock, map lookup, lazy refill) with
// golang.org/x/time/rate AllowN on a single limiter, both at a fixed time.
// Goal: ours no slower than the anchor, 0 allocs.
func BenchmarkTokenBucketMemory(b *testing.B) {
	now := time.Unix(1_764_489_600, 0)
	b.Run("ours", func(b *testing.B) {
		m, err := NewMemory(Policy{Name: "api", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 5}, MemoryConfig{})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		m.AllowN(ctx, "tenant-42", now, 1)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			m.AllowN(ctx, "tenant-42", now, 1)
		}
	})
	b.Run("anchor", func(b *testing.B) {
		l := rate.NewLimiter(5, 10)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			l.AllowN(now, 1)
		}
	})
}

// BenchmarkMemoryAlgorithms measures each algorithm's memory decision on an
// existing key with time advancing (the realistic path, not the denial fast
// path) and over many keys in parallel.
func BenchmarkMemoryAlgorithms(b *testing.B) {
	for _, p := range propertyPolicies {
		b.Run(p.Name, func(b *testing.B) {
			m, _ := NewMemory(p, MemoryConfig{})
			ctx := context.Background()
			now := time.Unix(1_764_489_600, 0)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				now = now.Add(10 * time.Millisecond)
				m.AllowN(ctx, "tenant-42", now, 1)
			}
		})
	}
	b.Run("token_bucket_parallel_1k_keys", func(b *testing.B) {
		m, _ := NewMemory(Policy{Name: "api", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 5}, MemoryConfig{})
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = "tenant-" + strconv.Itoa(i)
		}
		now := time.Unix(1_764_489_600, 0)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			i := 0
			for pb.Next() {
				m.AllowN(ctx, keys[i&1023], now, 1)
				i++
			}
		})
	})
}

// BenchmarkServiceAllow is the full in-process decision path of a memory
// policy through Service (lookup, validation, metrics).
func BenchmarkServiceAllow(b *testing.B) {
	s, err := NewService(Config{Policies: []Policy{{Name: "api", Algorithm: TokenBucket, Capacity: 10, RefillPerSecond: 5}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	now := time.Unix(1_764_489_600, 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.AllowN(ctx, "api", "tenant-42", now, 1)
	}
}

// BenchmarkAllowHandler is POST /v1/allow in process (no network): decode, decide, headers,
// body. It is most of what /v1/allow adds over the HTTP floor.
func BenchmarkAllowHandler(b *testing.B) {
	svc, err := NewService(Config{Policies: []Policy{{Name: "api", Algorithm: TokenBucket, Capacity: 1 << 40, RefillPerSecond: 1e6}}})
	if err != nil {
		b.Fatal(err)
	}
	h := svc.AllowHandler()
	body := []byte(`{"policy":"api","key":"tenant-42","cost":1}`)
	w := &discardWriter{h: http.Header{}}
	req := httptest.NewRequest("POST", "/v1/allow", nil)
	b.ReportAllocs()
	for b.Loop() {
		req.Body = io.NopCloser(bytes.NewReader(body))
		clear(w.h)
		h.ServeHTTP(w, req)
		if w.code != 200 {
			b.Fatalf("status %d", w.code)
		}
	}
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
