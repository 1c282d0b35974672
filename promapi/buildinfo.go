package promapi

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/jsonenc"
)

// buildInfo is /api/v1/status/buildinfo: the Prometheus version whose engine answers
// (v0.3NN.P of the Go module is Prometheus 3.NN.P), which Grafana reads to pick the
// features it uses.
var buildInfo = func() []byte {
	version := "3.0.0"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/prometheus/prometheus" {
				version = promVersion(d.Version, version)
			}
		}
	}
	b := []byte(`{"version":`)
	b = jsonenc.AppendString(b, version)
	b = append(b, `,"revision":"slide","branch":"slide","buildUser":"slide","buildDate":"","goVersion":`...)
	b = jsonenc.AppendString(b, runtime.Version())
	return append(b, '}')
}()

// promVersion maps the Go module version v0.3NN.P onto Prometheus' 3.NN.P.
func promVersion(mod, def string) string {
	parts := strings.Split(strings.TrimPrefix(mod, "v"), ".")
	if len(parts) < 3 || parts[0] != "0" {
		return def
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil || minor < 300 {
		return def
	}
	return "3." + strconv.Itoa(minor-300) + "." + strings.SplitN(parts[2], "-", 2)[0]
}
