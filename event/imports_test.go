package event

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/slide-metrics/slide"

// TestImports holds event to its place in the house (ingest, query, the backtest → event →
// window): it builds on window, textparse and jsonenc of this module and on the standard
// library alone, so any door can decode events without pulling in Kafka, HTTP or another
// door. Read from the package's directory with go/build, no go command.
func TestImports(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{module + "/window", module + "/textparse", module + "/jsonenc"}
	for _, imp := range p.Imports {
		switch first, _, _ := strings.Cut(imp, "/"); {
		case strings.HasPrefix(imp, module+"/") || imp == module:
			if !slices.Contains(allowed, imp) {
				t.Errorf("event imports %s; it may import only %v of this module", imp, allowed)
			}
		case strings.Contains(first, "."):
			t.Errorf("event imports %s; it builds on the standard library and this module alone", imp)
		}
	}
	if !slices.Contains(p.Imports, module+"/window") {
		t.Error("the walk found no import of window, which event uses: it reads nothing")
	}
}
