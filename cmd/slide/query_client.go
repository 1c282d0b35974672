package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/slide-metrics/slide/query"
)

// slide query's side of HTTP: where it asks (--addr, SLIDE_URL, and the hint when that
// fails), the request, and the API's answers and errors as it prints them.

// whereHint says how to point slide query at a server: --addr or SLIDE_URL. When neither
// was given and SLIDE_ADDR is set, it says that SLIDE_ADDR is serve's listen address, which
// slide query does not read: a user who exported it for serve (SLIDE_ADDR=:8081 slide serve)
// otherwise sees the default address dialled with no word of why.
func whereHint(fs *flag.FlagSet, lookup func(string) (string, bool)) string {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "addr" })
	if v, ok := lookup("SLIDE_ADDR"); ok && v != "" && !given {
		return fmt.Sprintf("SLIDE_ADDR=%s is serve's listen address; slide query reads --addr or SLIDE_URL, e.g. SLIDE_URL=%s", v, urlOf(v))
	}
	return "see --addr or SLIDE_URL"
}

// urlOf is a listen address as a client's URL: ":8081" is http://127.0.0.1:8081, and a value
// that is already a URL (SLIDE_ADDR set to what SLIDE_URL takes) is itself.
func urlOf(listen string) string {
	if strings.Contains(listen, "://") {
		return listen
	}
	if strings.HasPrefix(listen, ":") {
		return "http://127.0.0.1" + listen
	}
	return "http://" + listen
}

// normalizeAddr accepts "http://host:port", "host:port" or ":port" (as serve's --addr is
// written) and returns a base URL without a trailing slash.
func normalizeAddr(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not a base URL such as http://127.0.0.1:8080", addr)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// apiError is a JSON error answer of the API.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (HTTP %d %s)", shown(e.message), e.status, shown(e.code))
}

// notSlide is the error of an answer that is not the API's: u answered status with body,
// which holds no slide error (a proxy's empty 404, an HTML error page, another service on the
// port). It names the URL, the status and at most 120 bytes of the body, quoted on one line.
func notSlide(u string, status int, body []byte, where string) error {
	msg := fmt.Sprintf("%s answered HTTP %d %s, and not slide's JSON error", u, status, http.StatusText(status))
	if b := bytes.TrimSpace(body); len(b) > 0 {
		if len(b) > 120 {
			b = append(bytes.ToValidUTF8(b[:120], nil), "…"...)
		}
		msg += fmt.Sprintf(" (body %q)", b)
	}
	return fmt.Errorf("%s: is slide serve there? %s", msg, where)
}

// maxAnswerBytes bounds an answer slide query reads: far above any table it prints.
const maxAnswerBytes = 64 << 20

// get fetches path?v and returns the body of a 200, or the API's error.
func (c *queryClient) get(ctx context.Context, path string, v url.Values) ([]byte, error) {
	u := c.addr + path
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w (is slide serve running there? %s)", c.addr, err, c.where)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading answer of %s: %w", path, err)
	}
	if len(body) > maxAnswerBytes { // cut short, it would be reported as broken JSON
		return nil, fmt.Errorf("answer of %s: over %d MiB", path, maxAnswerBytes>>20)
	}
	if resp.StatusCode != http.StatusOK {
		var e query.ErrorResponse
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return nil, &apiError{resp.StatusCode, e.Error.Code, e.Error.Message}
		}
		return nil, notSlide(c.addr+path, resp.StatusCode, body, c.where)
	}
	return body, nil
}

// answer gets route's answer and decodes it into a, or with --json prints it as it came
// instead; done says the command has nothing more to print (err is then its result).
func (c *queryClient) answer(ctx context.Context, route string, v url.Values, w io.Writer, a any) (done bool, err error) {
	body, err := c.get(ctx, route, v)
	switch {
	case err != nil:
		return true, err
	case c.json:
		return true, printJSON(w, body)
	}
	if err := json.Unmarshal(body, a); err != nil {
		return true, fmt.Errorf("decoding %s answer: %w", route, err)
	}
	return false, nil
}

// printJSON writes an API body, one document a line: as it came, but for characters a
// terminal would not show as themselves (C1 controls, bidi overrides, any other rune
// strconv.IsPrint refuses), written as the \u escapes of the same JSON string. The API
// writes JSON as encoding/json does, which escapes C0 controls only.
func printJSON(w io.Writer, body []byte) error {
	body = bytes.TrimRight(body, "\n")
	_, err := fmt.Fprintf(w, "%s\n", escapeOdd(body))
	return err
}

// escapeOdd rewrites every rune of b from U+0080 up that strconv.IsPrint refuses as a JSON
// \u escape (two for one beyond U+FFFF); b is returned as it is when it holds none. Outside
// strings JSON holds no such rune, so the document means what it did.
func escapeOdd(b []byte) []byte {
	var out []byte
	start := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if strconv.IsPrint(r) || r == utf8.RuneError && size == 1 {
			i += size
			continue
		}
		out = append(out, b[start:i]...)
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
		start = i
	}
	if out == nil {
		return b
	}
	return append(out, b[start:]...)
}
