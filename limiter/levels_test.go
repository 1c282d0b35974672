package limiter

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A key that starts with its policy's level separator ("/u1": an empty tenant) has an
// empty first level. Memory answered a 429 of limit 0, Redis and cluster failed open and
// admitted it uncounted (every such key unlimited), and GET /v1/quota answered 500, 400 or
// 503. Every backend now refuses it as an invalid key, naming the separator.
func TestLevelsKeyWithEmptyFirstLevel(t *testing.T) {
	fb := &fakeBackend{}
	levels := Levels{Separator: "/", Limits: [MaxLevels]int64{6, 4}, N: 2}
	s := newTestService(t, Config{Redis: fb, Policies: []Policy{
		{Name: "mem", Algorithm: FixedWindow, Window: time.Hour, Levels: levels},
		{Name: "red", Algorithm: FixedWindow, Window: time.Hour, Levels: levels, Backend: BackendRedis},
	}})
	ctx := context.Background()
	for _, p := range []string{"mem", "red"} {
		d, err := s.AllowN(ctx, p, "/u1", t0, 1)
		if !errors.Is(err, ErrInvalidKey) || d.Allowed {
			t.Errorf("%s: AllowN(/u1) = %+v, %v; want ErrInvalidKey", p, d, err)
		}
		if _, err := s.Quota(ctx, p, "/u1", t0); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: Quota(/u1) = %v; want ErrInvalidKey", p, err)
		}
		// A separator inside the key, or a one-level key, is fine.
		for _, k := range []string{"org//u1", "org"} {
			if d, err := s.AllowN(ctx, p, k, t0, 1); err != nil || !d.Allowed {
				t.Errorf("%s: AllowN(%s) = %+v, %v; want allowed", p, k, d, err)
			}
		}
	}
	if calls := fb.calls.Load(); calls != 2 {
		t.Errorf("backend calls %d, want 2 (the refused key never reaches Redis)", calls)
	}
}
