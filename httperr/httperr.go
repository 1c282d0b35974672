// Package httperr is the one vocabulary and the one writer of the errors slide's HTTP
// API answers, on every route: the query API, POST /v1/events, the limiter's POST
// /v1/allow and middleware (limiter/limithttp), and a cluster read that cannot cover
// every partition. An error is JSON,
//
//	{"error":{"code":"bad_parameter","message":"parameter \"window\": ...","param":"window"}}
//
// with "param" when one parameter is to blame and, on some codes, more members inside
// "error" ("missing_partitions" on unavailable). The code is what a client branches on,
// the message is for people and may change.
//
// A code is a class of failure with one HTTP status, as Google's canonical error codes
// and Prometheus' API error types are: "which parameter" is "param", not a code of its
// own. The names are the ones the query API has answered and the README documented
// since the first release (bad_parameter, not_found, not_ready, unavailable...); the
// limiter's HTTP face had its own (invalid_parameter, missing_parameter, unknown_policy,
// invalid_key, invalid_cost: now bad_parameter with "param" policy, policies, key or
// cost; invalid_json: now bad_body; backend_unavailable: now unavailable, which a usage
// rule's on_unavailable: closed already meant).
//
// The package is a leaf (net/http and jsonenc only), so every HTTP face imports it
// whatever its place in the house.
package httperr

import (
	"net/http"
	"sync"

	"github.com/slide-metrics/slide/jsonenc"
)

// Code is an error code of the JSON error body. Each has one HTTP status (Status).
type Code string

// The codes, by status.
const (
	// BadParameter (400): a parameter of the query string or a field of the body is
	// missing, malformed, unknown, repeated, out of range or names nothing (an unknown
	// policy); "param" names it.
	BadParameter Code = "bad_parameter"
	// BadBody (400): the body could not be read, or is not the one JSON object the route
	// takes.
	BadBody Code = "bad_body"
	// Unauthorized (401): the bearer token is missing or wrong.
	Unauthorized Code = "unauthorized"
	// NotFound (404): no such series, route or exposition.
	NotFound Code = "not_found"
	// MethodNotAllowed (405): the route takes other methods, listed in Allow.
	MethodNotAllowed Code = "method_not_allowed"
	// BodyTooLarge (413): the body is over the route's limit.
	BodyTooLarge Code = "body_too_large"
	// UnsupportedMediaType (415): the body's Content-Type (or Content-Encoding) is none the
	// route reads; Accept-Post lists those it does.
	UnsupportedMediaType Code = "unsupported_media_type"
	// Internal (500): a failure of the server's own; the message says what.
	Internal Code = "internal"
	// NotConfigured (501): the route's hook (event sink, limiter) is not set.
	NotConfigured Code = "not_configured"
	// NotReady (503, Retry-After): this instance is restoring its windows.
	NotReady Code = "not_ready"
	// Unavailable (503, Retry-After): something the answer needs cannot be reached: the
	// owners of some partitions ("missing_partitions" lists them), the backend of a
	// closed limiter policy, or a read slot: every one stayed busy with other reads for
	// the read's whole timeout (query.Config.Reads, slide serve --read-max-concurrency).
	Unavailable Code = "unavailable"
	// Timeout (503, no Retry-After): the read took longer than the server lets one take
	// (query.Config.ReadTimeout) and stopped; the same read would stop again, so narrow it.
	Timeout Code = "timeout"
)

// RetryAfter is the Retry-After every 503 carries: one second, the usual time for an
// instance to finish a restore step or for a peer or Redis to come back.
const RetryAfter = "1"

// Status is the HTTP status c is answered with; 500 for a code this package does not
// list.
func (c Code) Status() int {
	switch c {
	case BadParameter, BadBody:
		return http.StatusBadRequest
	case Unauthorized:
		return http.StatusUnauthorized
	case NotFound:
		return http.StatusNotFound
	case MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case BodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case UnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case NotConfigured:
		return http.StatusNotImplemented
	case NotReady, Unavailable, Timeout:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// AppendOpen appends the error body up to its last member, {"error":{"code":...,
// "message":...[,"param":...], for a caller that adds members of its own (each after a
// comma) and closes the error object with "}" and the body with "}\n".
func AppendOpen(b []byte, c Code, param, msg string) []byte {
	b = append(b, `{"error":{"code":`...)
	b = jsonenc.AppendString(b, string(c))
	b = append(b, `,"message":`...)
	b = jsonenc.AppendString(b, msg)
	if param != "" {
		b = append(b, `,"param":`...)
		b = jsonenc.AppendString(b, param)
	}
	return b
}

// Append appends the whole error body and a newline; param is omitted when empty. The
// bytes are encoding/json's for the same struct.
func Append(b []byte, c Code, param, msg string) []byte {
	return append(AppendOpen(b, c, param, msg), "}}\n"...)
}

var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
	retryAfter      = []string{RetryAfter}
)

// Send answers body, a complete error body (Append, or AppendOpen and the caller's
// members), with c's status, Content-Type application/json, Cache-Control no-store, and
// Retry-After on a 503 but a timeout's (asking again would time out again).
func Send(w http.ResponseWriter, c Code, body []byte) {
	h := w.Header()
	// Assigned, not Set: the names are canonical already, and this neither canonicalizes
	// nor allocates.
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	status := c.Status()
	if status == http.StatusServiceUnavailable && c != Timeout {
		h["Retry-After"] = retryAfter
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// Write answers the error c with param (empty: none) and msg: the one writer of every
// route's errors.
func Write(w http.ResponseWriter, c Code, param, msg string) {
	bp := bufPool.Get().(*[]byte)
	b := Append((*bp)[:0], c, param, msg)
	Send(w, c, b)
	if cap(b) <= 64<<10 { // a message is short; one that is not should not stay pinned
		*bp = b
		bufPool.Put(bp)
	}
}
