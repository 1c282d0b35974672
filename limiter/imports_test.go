package limiter

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/slide-metrics/slide"

// netHTTPImports walks the non-test imports of the module's package pkg and of every
// module package it builds on, reading only their directories (go/build, no go command),
// and returns each import of net/http (or a package under it) as "importer → import".
func netHTTPImports(t *testing.T, pkg string) []string {
	t.Helper()
	var found []string
	seen := map[string]bool{}
	var visit func(path string)
	visit = func(path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		dir := filepath.Join("..", filepath.FromSlash(strings.TrimPrefix(path, module))) // limiter/ is one level below the module root
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("reading package %s in %s: %v", path, dir, err)
		}
		for _, imp := range p.Imports {
			switch {
			case imp == "net/http" || strings.HasPrefix(imp, "net/http/"):
				found = append(found, path+" → "+imp)
			case strings.HasPrefix(imp, module+"/"):
				visit(imp)
			}
		}
	}
	visit(pkg)
	return found
}

// TestCoreImportsNoNetHTTP holds the core apart from its HTTP face: neither package limiter
// nor a package of this module under it imports net/http; limiter/limithttp does. (The
// metrics' client_golang links net/http by itself, through expvar and expfmt, so
// `go list -deps` still lists it: that is the library's, not an API of the core.)
func TestCoreImportsNoNetHTTP(t *testing.T) {
	if found := netHTTPImports(t, module+"/limiter"); len(found) > 0 {
		t.Errorf("the limiter core reaches net/http: %s; HTTP belongs in limiter/limithttp", strings.Join(found, ", "))
	}
	// The walk does see an import of net/http where there is one.
	if found := netHTTPImports(t, module+"/limiter/limithttp"); len(found) == 0 {
		t.Error("the walk found no net/http in limiter/limithttp, which serves HTTP: it reads nothing")
	}
}
