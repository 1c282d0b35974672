package limithttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/textparse"
)

// The /v1/allow dialect is the event decoder's: field names match exactly ("Policy" is an
// unknown field, where encoding/json would match it case-insensitively), a field given
// twice is refused (encoding/json takes the last), and a string that is not valid UTF-8,
// raw or through an escaped lone surrogate, is refused rather than rewritten to U+FFFD:
// keys are bytes, and "t\xff" and "t\xfe" are not one bucket. The hand parser
// (parseAllowFast) takes the common shape; decodeAllowStrict decides everything else and
// words the errors. It walks the object with encoding/json's tokenizer and decodes each
// value on its own, so unknown fields are refused before their values are read.

// requestError is a /v1/allow body problem that names its parameter.
type requestError struct {
	param, msg string
	bare       bool // msg says it all (an unknown field is named in it, as before)
}

func (e *requestError) Error() string {
	if e.bare {
		return e.msg
	}
	return `parameter "` + e.param + `": ` + e.msg
}

var errNotObject = errors.New("body must be a JSON object")

var allowFields = [...]string{"policy", "policies", "key", "cost"}

// decodeAllowStrict parses a /v1/allow body in the strict dialect.
func decodeAllowStrict(data []byte) (allowRequest, error) {
	var req allowRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return req, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		if tok == nil { // null decodes to nothing, as encoding/json does
			return req, trailing(dec)
		}
		return req, errNotObject
	}
	var seen [len(allowFields)]bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return req, err
		}
		name, _ := tok.(string)
		i := fieldIndex(name)
		if i < 0 {
			return req, &requestError{param: limiter.ClipName(name), bare: true,
				msg: fmt.Sprintf(`unknown field %q (known: "policy", "policies", "key", "cost"; names match exactly)`, limiter.ClipName(name))}
		}
		if seen[i] {
			return req, &requestError{param: name, msg: "given twice (a field appears at most once)"}
		}
		seen[i] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return req, err
		}
		if string(raw) == "null" {
			continue // as encoding/json: the field stays unset
		}
		switch name {
		case "policy":
			req.Policy, err = strictString(name, raw)
		case "key":
			req.Key, err = strictString(name, raw)
		case "policies":
			var items []json.RawMessage
			if json.Unmarshal(raw, &items) != nil {
				return req, &json.UnmarshalTypeError{Value: "non-array", Type: reflect.TypeFor[[]string](), Field: name}
			}
			req.Policies = make([]string, len(items))
			for j, it := range items {
				if string(it) == "null" {
					continue
				}
				if req.Policies[j], err = strictString(name, it); err != nil {
					break
				}
			}
		case "cost":
			var c int64
			if err = json.Unmarshal(raw, &c); err != nil {
				var ute *json.UnmarshalTypeError
				if errors.As(err, &ute) {
					ute.Field = name
				}
			}
			req.Cost = &c
		}
		if err != nil {
			return req, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return req, err
	}
	return req, trailing(dec)
}

// trailing refuses anything after the object.
func trailing(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

func fieldIndex(name string) int {
	for i, f := range allowFields {
		if f == name {
			return i
		}
	}
	return -1
}

// strictString decodes the JSON string raw of field name, refusing what encoding/json would
// rewrite to U+FFFD.
func strictString(name string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &json.UnmarshalTypeError{Value: "non-string", Type: reflect.TypeFor[string](), Field: name}
	}
	if lossyString(raw) {
		return "", &requestError{param: name,
			msg: "not valid UTF-8 (a raw byte or an escaped lone surrogate): keys are bytes, refused rather than rewritten to U+FFFD"}
	}
	return s, nil
}

// lossyString reports whether the valid JSON string raw (quotes included) holds invalid
// UTF-8 or an escaped surrogate that is not half of a pair: what encoding/json rewrites.
func lossyString(raw []byte) bool { return textparse.Lossy(raw[1 : len(raw)-1]) }
