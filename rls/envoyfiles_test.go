//go:build envoyfiles

package rls_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slide-metrics/slide/rls"
)

// TestEnvoyRatelimitFiles loads envoyproxy/ratelimit's own example and test
// configuration files unchanged, from a clone named by SLIDE_ENVOY_RATELIMIT_DIR
// (nothing of that repository is copied into slide; CI runs the same features
// through testdata/config). It is behind the envoyfiles build tag because it needs that
// clone: go test -tags envoyfiles -run TestEnvoyRatelimitFiles ./rls with the variable set.
func TestEnvoyRatelimitFiles(t *testing.T) {
	root := os.Getenv("SLIDE_ENVOY_RATELIMIT_DIR")
	if root == "" {
		t.Fatal("SLIDE_ENVOY_RATELIMIT_DIR is not set: point it at a clone of envoyproxy/ratelimit")
	}
	good := []string{
		"examples/ratelimit/config/config.yaml", "examples/ratelimit/config/example.yaml",
		"test/config/basic_config.yaml", "test/config/wildcard.yaml", "test/config/shadowmode_config.yaml",
		"test/config/share_threshold.yaml", "test/config/metadata.yaml",
		"test/integration/runtime/current/ratelimit/config/basic.yaml",
		"test/integration/runtime/current/ratelimit/config/another.yaml",
		"test/integration/runtime/current/ratelimit/config/share_threshold.yaml",
	}
	bad := []string{"test/config/bad_limit_unit.yaml", "test/config/bad_yaml.yaml", "test/config/duplicate_key.yaml",
		"test/config/empty_domain.yaml", "test/config/empty_key.yaml", "test/config/misspelled_key.yaml",
		"test/config/misspelled_key2.yaml", "test/config/non_string_key.yaml", "test/config/replaces_empty.yaml",
		"test/config/replaces_self.yaml", "test/config/unlimited_with_unit.yaml", "test/config/non_map_list.yaml"}
	for _, f := range good {
		cfg, err := rls.Load(filepath.Join(root, f), rls.LoadOptions{})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		t.Logf("%s: domains %v, %d policies", f, cfg.Domains(), len(cfg.Policies()))
	}
	for _, f := range bad {
		if _, err := rls.Load(filepath.Join(root, f), rls.LoadOptions{}); err == nil {
			t.Errorf("%s: loaded, want an error", f)
		} else {
			t.Logf("%s: %v", f, err)
		}
	}
}
