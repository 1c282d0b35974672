package query

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/jsonenc"
)

// handleTraces serves POST /v1/traces, the OTLP/HTTP traces receiver: what an OpenTelemetry
// Collector's otlphttp exporter (or an SDK's OTLP/HTTP exporter) sends, with slide as its
// endpoint. The body is one ExportTraceServiceRequest, protobuf for application/x-protobuf and
// OTLP/JSON for application/json (Config.Traces), each span an event as --event-format
// otlp_proto and otlp_json read them from Kafka, into this instance's windows as POST
// /v1/events' are (they are not in the log).
//
// The answer is OTLP/HTTP's, in the request's encoding: 200 with an ExportTraceServiceResponse,
// whose partial_success counts the spans refused and says why the first one was (the
// exporter logs it and does not retry them); 400 with a google.rpc.Status for a body that is
// not a request at all (bad_record: nothing of it is recorded); 415 for another Content-Type;
// 413 past MaxBodyBytes, as POST /v1/events; every failure's body a google.rpc.Status, as
// OTLP/HTTP requires (otlpFail). A gzip Content-Encoding (the Collector's default) is
// inflated within MaxBodyBytes.
func (s *Server) handleTraces(w http.ResponseWriter, r *http.Request) {
	s.handleOTLP(w, r, s.cfg.Traces, "OTLP/HTTP traces are application/x-protobuf or application/json", "rejectedSpans")
}

// handleLogs serves POST /v1/logs, the OTLP/HTTP logs receiver: an ExportLogsServiceRequest
// (protobuf or OTLP/JSON, Config.Logs), each log record's body a line of the --event-map, as
// --event-format otlp_logs reads them from Kafka; answered as POST /v1/traces is, its
// ExportLogsServiceResponse counting the log records refused. Without an event map the route
// answers 501.
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	if len(s.cfg.Logs) == 0 {
		otlpFail(r)(w, httperr.NotConfigured, "POST /v1/logs reads each log record's body through an event map, and this server has none: start slide serve with --event-map (envoy, nginx or a YAML file)")
		return
	}
	s.handleOTLP(w, r, s.cfg.Logs, "OTLP/HTTP logs are application/x-protobuf or application/json", "rejectedLogRecords")
}

// handleOTLP is an OTLP/HTTP receiver over intakes by media type: want says the types it
// takes, rejected names the JSON answer's count of refusals (the protobuf's is field 1 of
// partial_success in every signal's response).
func (s *Server) handleOTLP(w http.ResponseWriter, r *http.Request, intakes map[string]*event.Intake, want, rejected string) {
	ct, in, body, ok := s.intakeBody(w, r, intakes, "", want, otlpFail(r))
	if !ok {
		return
	}
	defer body.release()
	res := in.Take(body.b, s.now())
	s.metrics.events.WithLabelValues("accepted").Add(float64(res.Accepted))
	refused, first := res.Parts, "" // spans or log records, as partial_success counts them
	for _, reason := range rejectedOrder {
		if n := res.Refused[reason]; n > 0 {
			s.metrics.events.WithLabelValues(reason.String()).Add(float64(n))
			if first == "" {
				first = reason.String() + ": " + res.First[reason]
			}
		}
	}
	proto := ct == "application/x-protobuf"
	if res.Refused[event.ReasonBadRecord] > 0 && res.Accepted == 0 {
		writeOTLPStatus(w, proto, http.StatusBadRequest, 3, res.First[event.ReasonBadRecord]) // 3: INVALID_ARGUMENT
		return
	}
	var b []byte
	if proto {
		if refused > 0 { // Export…ServiceResponse{partial_success: {rejected_spans|_log_records, error_message}}
			var ps []byte
			ps = binary.AppendUvarint(append(ps, 0x08), uint64(refused))
			ps = appendProtoString(ps, 2, first)
			b = appendProtoBytes(b, 1, ps)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
		return
	}
	b = append(b, '{')
	if refused > 0 {
		b = append(append(append(b, `"partialSuccess":{"`...), rejected...), `":"`...)
		b = strconv.AppendInt(b, int64(refused), 10)
		b = append(b, `","errorMessage":`...)
		b = jsonenc.AppendString(b, first)
		b = append(b, '}')
	}
	writeJSON(w, http.StatusOK, append(b, "}\n"...))
}

// writeOTLPStatus answers an OTLP/HTTP failure: a google.rpc.Status {code, message} in the
// request's encoding.
func writeOTLPStatus(w http.ResponseWriter, proto bool, status, code int, msg string) {
	if proto {
		b := binary.AppendUvarint([]byte{0x08}, uint64(code))
		b = appendProtoString(b, 2, msg)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return
	}
	b := append([]byte(`{"code":`), strconv.Itoa(code)...)
	b = append(b, `,"message":`...)
	b = jsonenc.AppendString(b, msg)
	writeJSON(w, status, append(b, "}\n"...))
}

func appendProtoString(b []byte, field int, s string) []byte {
	return appendProtoBytes(b, field, []byte(s))
}

func appendProtoBytes(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// intakeBody picks the intake of r's media type among intakes (a missing type is
// missing's) and reads r's body whole (readBody), or answers r itself: 501 without intakes,
// 415 for a type none takes (want says which do; Accept-Post lists them), as readBody does.
func (s *Server) intakeBody(w http.ResponseWriter, r *http.Request, intakes map[string]*event.Intake, missing, want string, fail failFunc) (string, *event.Intake, body, bool) {
	ct := mediaType(r, missing)
	in := intakes[ct]
	switch {
	case len(intakes) == 0:
		fail(w, httperr.NotConfigured, "no intake is configured on this server for "+r.URL.Path)
		return ct, nil, body{}, false
	case in == nil:
		w.Header().Set("Accept-Post", "application/x-protobuf, application/json")
		fail(w, httperr.UnsupportedMediaType, "Content-Type "+strconv.Quote(ct)+": "+want)
		return ct, nil, body{}, false
	}
	b, ok := s.readBody(w, r, fail)
	return ct, in, b, ok
}

// mediaType is r's Content-Type without parameters, lower case; missing when it has none.
func mediaType(r *http.Request, missing string) string {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if ct = strings.ToLower(strings.TrimSpace(ct)); ct == "" {
		ct = missing
	}
	return ct
}

// failFunc answers a request that fails before its body is taken, with the status of c:
// slide's error body (httperr) on slide's routes, a google.rpc.Status on OTLP's.
type failFunc func(w http.ResponseWriter, c httperr.Code, msg string)

// slideFail answers as every slide route does: {"error":{"code","message"}}.
func slideFail(w http.ResponseWriter, c httperr.Code, msg string) { httperr.Write(w, c, "", msg) }

// otlpFail answers as OTLP/HTTP requires of every 4xx and 5xx: a google.rpc.Status in the
// request's encoding (OTLP/JSON for application/json, else protobuf), with c's status;
// its code is INVALID_ARGUMENT (3), UNIMPLEMENTED (12) for a route not configured.
func otlpFail(r *http.Request) failFunc {
	proto := mediaType(r, "") != "application/json"
	return func(w http.ResponseWriter, c httperr.Code, msg string) {
		code := 3
		if c == httperr.NotConfigured {
			code = 12
		}
		writeOTLPStatus(w, proto, c.Status(), code, msg)
	}
}

// body is a request body read whole from the pool; release gives its buffer back.
type body struct {
	b   []byte
	buf *bytes.Buffer
	max int64
}

func (b body) release() {
	if b.buf.Cap() <= int(b.max)+bytes.MinRead {
		eventsBufPool.Put(b.buf)
	}
}

// readBody reads r's body whole into a pooled buffer, at most MaxBodyBytes of it after
// inflating a gzip Content-Encoding (so a small bomb is refused as a large body is), and
// answers the request itself when it cannot: 413 past the limit (refuseTooLarge), 415 for an
// encoding other than gzip or identity, 400 when reading fails.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, fail failFunc) (body, bool) {
	limit := s.cfg.MaxBodyBytes
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	if enc != "" && enc != "identity" && enc != "gzip" {
		fail(w, httperr.UnsupportedMediaType, "Content-Encoding "+strconv.Quote(enc)+": want gzip or none")
		return body{}, false
	}
	if r.ContentLength > limit {
		refuseTooLarge(w, r, limit, fail)
		return body{}, false
	}
	buf := eventsBufPool.Get().(*bytes.Buffer)
	buf.Reset()
	b := body{buf: buf, max: limit}
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	if enc == "gzip" {
		zr, err := gzip.NewReader(src)
		if err != nil {
			b.release()
			fail(w, httperr.BadBody, "reading gzip body: "+err.Error())
			return body{}, false
		}
		defer zr.Close()
		src = io.LimitReader(zr, limit+1) // one byte past the limit says it is over
	}
	_, err := buf.ReadFrom(src)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge), int64(buf.Len()) > limit:
		b.release()
		refuseTooLarge(w, r, limit, fail)
		return body{}, false
	case err != nil:
		b.release()
		fail(w, httperr.BadBody, "reading body: "+err.Error())
		return body{}, false
	}
	b.b = buf.Bytes()
	return b, true
}
