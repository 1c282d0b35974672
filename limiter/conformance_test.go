package limiter_test

import (
	"testing"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limitertest"
)

func TestMemoryConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, p limiter.Policy) limiter.Limiter {
		m, err := limiter.NewMemory(p, limiter.MemoryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}
