package promapi

import (
	"math"
	"strconv"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/slide-metrics/slide/jsonenc"
)

// The encoders below write what Prometheus' web/api/v1 codec writes, byte for byte where
// clients parse it: timestamps as seconds with up to three decimals (a number), sample
// values as strings ("NaN", "+Inf" too), histograms as {count, sum, buckets} with the
// boundary rule of each bucket, empty buckets left out. TestJSONMatchesPrometheusCodec
// holds them to the codec's own output.

// appendTimestamp writes t (ms) as seconds, as jsonutil.MarshalTimestamp does.
func appendTimestamp(b []byte, t int64) []byte {
	if t < 0 {
		b = append(b, '-')
		t = -t
	}
	b = strconv.AppendInt(b, t/1000, 10)
	if f := t % 1000; f != 0 {
		b = append(b, '.')
		if f < 100 {
			b = append(b, '0')
		}
		if f < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, f, 10)
	}
	return b
}

// appendValue writes f as a quoted string, as jsonutil.MarshalFloat does.
func appendValue(b []byte, f float64) []byte {
	b = append(b, '"')
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	return append(b, '"')
}

func appendLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	i := 0
	ls.Range(func(l labels.Label) {
		if i > 0 {
			b = append(b, ',')
		}
		i++
		b = jsonenc.AppendString(b, l.Name)
		b = append(b, ':')
		b = jsonenc.AppendString(b, l.Value)
	})
	return append(b, '}')
}

// appendHistogram writes h as jsonutil.MarshalHistogram does.
func appendHistogram(b []byte, h *histogram.FloatHistogram) []byte {
	b = append(b, `{"count":`...)
	b = appendValue(b, h.Count)
	b = append(b, `,"sum":`...)
	b = appendValue(b, h.Sum)
	found := false
	it := h.AllBucketIterator()
	for it.Next() {
		bk := it.At()
		if bk.Count == 0 {
			continue
		}
		if !found {
			b = append(b, `,"buckets":[`...)
			found = true
		} else {
			b = append(b, ',')
		}
		rule := 2 // open on both sides
		switch {
		case bk.LowerInclusive && bk.UpperInclusive:
			rule = 3
		case bk.LowerInclusive:
			rule = 1
		case bk.UpperInclusive:
			rule = 0
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(rule), 10)
		b = append(b, ',')
		b = appendValue(b, bk.Lower)
		b = append(b, ',')
		b = appendValue(b, bk.Upper)
		b = append(b, ',')
		b = appendValue(b, bk.Count)
		b = append(b, ']')
	}
	if found {
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendSample(b []byte, s promql.Sample) []byte {
	b = append(b, `{"metric":`...)
	b = appendLabels(b, s.Metric)
	if s.H == nil {
		b = append(b, `,"value":[`...)
		b = appendTimestamp(b, s.T)
		b = append(b, ',')
		b = appendValue(b, s.F)
	} else {
		b = append(b, `,"histogram":[`...)
		b = appendTimestamp(b, s.T)
		b = append(b, ',')
		b = appendHistogram(b, s.H)
	}
	return append(b, "]}"...)
}

func appendSeries(b []byte, s promql.Series) []byte {
	b = append(b, `{"metric":`...)
	b = appendLabels(b, s.Metric)
	for i, p := range s.Floats {
		if i == 0 {
			b = append(b, `,"values":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendTimestamp(b, p.T)
		b = append(b, ',')
		b = appendValue(b, p.F)
		b = append(b, ']')
	}
	if len(s.Floats) > 0 {
		b = append(b, ']')
	}
	for i, p := range s.Histograms {
		if i == 0 {
			b = append(b, `,"histograms":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendTimestamp(b, p.T)
		b = append(b, ',')
		b = appendHistogram(b, p.H)
		b = append(b, ']')
	}
	if len(s.Histograms) > 0 {
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendQueryData writes {"resultType":…,"result":…} of a query's value.
func appendQueryData(b []byte, v parser.Value) []byte {
	b = append(b, `{"resultType":`...)
	b = jsonenc.AppendString(b, string(v.Type()))
	b = append(b, `,"result":`...)
	switch v := v.(type) {
	case promql.Vector:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSample(b, s)
		}
		b = append(b, ']')
	case promql.Matrix:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSeries(b, s)
		}
		b = append(b, ']')
	case promql.Scalar:
		b = append(b, '[')
		b = appendTimestamp(b, v.T)
		b = append(b, ',')
		b = appendValue(b, v.V)
		b = append(b, ']')
	case promql.String:
		b = append(b, '[')
		b = appendTimestamp(b, v.T)
		b = append(b, ',')
		b = jsonenc.AppendString(b, v.V)
		b = append(b, ']')
	default:
		b = append(b, "null"...)
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, s)
	}
	return append(b, ']')
}

// appendEnvelope writes the success envelope around data, with warnings and infos when
// there are some.
func appendEnvelope(b, data []byte, warnings, infos []string) []byte {
	b = append(b, envelopeHead...)
	b = append(b, data...)
	return appendEnvelopeTail(b, warnings, infos)
}

// envelopeHead is the success envelope up to its data.
const envelopeHead = `{"status":"success","data":`

// appendEnvelopeTail is the success envelope after its data.
func appendEnvelopeTail(b []byte, warnings, infos []string) []byte {
	if len(warnings) > 0 {
		b = append(b, `,"warnings":`...)
		b = appendStrings(b, warnings)
	}
	if len(infos) > 0 {
		b = append(b, `,"infos":`...)
		b = appendStrings(b, infos)
	}
	return append(b, '}')
}

// appendError writes {"status":"error","errorType":…,"error":…}.
func appendError(b []byte, typ, msg string) []byte {
	b = append(b, `{"status":"error","errorType":`...)
	b = jsonenc.AppendString(b, typ)
	b = append(b, `,"error":`...)
	b = jsonenc.AppendString(b, msg)
	return append(b, '}')
}
