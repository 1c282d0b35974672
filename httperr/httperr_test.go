package httperr_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slide-metrics/slide/httperr"
)

func TestAppendMatchesEncodingJSON(t *testing.T) {
	type body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param,omitempty"`
		} `json:"error"`
	}
	for _, param := range []string{"", "window"} {
		var v body
		v.Error.Code, v.Error.Message, v.Error.Param = "bad_parameter", `parameter "window": <5m> & more`+"\u2028\xff", param
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := httperr.Append(nil, httperr.BadParameter, param, v.Error.Message); string(got) != string(want)+"\n" {
			t.Errorf("Append(param %q) = %s, want %s", param, got, want)
		}
	}
}

// Every code answers its documented status, as JSON that is never cached, and every 503
// (and only a 503) says when to retry.
func TestWrite(t *testing.T) {
	for _, c := range []struct {
		code   httperr.Code
		status int
	}{
		{httperr.BadParameter, 400}, {httperr.BadBody, 400}, {httperr.Unauthorized, 401},
		{httperr.NotFound, 404}, {httperr.MethodNotAllowed, 405}, {httperr.BodyTooLarge, 413},
		{httperr.Internal, 500}, {httperr.NotConfigured, 501}, {httperr.NotReady, 503},
		{httperr.Unavailable, 503}, {httperr.Timeout, 503}, {httperr.Code("no_such_code"), 500},
	} {
		w := httptest.NewRecorder()
		httperr.Write(w, c.code, "p", "m")
		var e struct {
			Error struct{ Code, Message, Param string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
			t.Fatalf("%s: body %q: %v", c.code, w.Body, err)
		}
		h := w.Header()
		if w.Code != c.status || e.Error.Code != string(c.code) || e.Error.Param != "p" || e.Error.Message != "m" {
			t.Errorf("%s: %d %+v, want %d", c.code, w.Code, e.Error, c.status)
		}
		if h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", c.code, h)
		}
		retry := c.status == 503 && c.code != httperr.Timeout // a timeout would time out again
		if ra := h.Get("Retry-After"); retry != (ra == httperr.RetryAfter) || (!retry && ra != "") {
			t.Errorf("%s: Retry-After %q on a %d", c.code, ra, c.status)
		}
	}
}

func TestWriteAllocations(t *testing.T) {
	w := httptest.NewRecorder()
	n := testing.AllocsPerRun(100, func() {
		w.Body.Reset()
		httperr.Write(w, httperr.BadParameter, "window", `parameter "window": 7s is not a multiple of the slot width 10s`)
	})
	if n > 0 {
		t.Errorf("Write allocates %.0f times per error, want 0 (pooled buffer, headers assigned)", n)
	}
}

// An error with members of its own: the 503 of a read missing partitions.
func ExampleAppendOpen() {
	b := httperr.AppendOpen(nil, httperr.Unavailable, "", "2 partitions have no reachable, restored owner")
	b = append(b, `,"missing_partitions":[5,6]}}`+"\n"...)
	w := httptest.NewRecorder()
	httperr.Send(w, httperr.Unavailable, b)
	fmt.Print(w.Code, " Retry-After: ", w.Header().Get("Retry-After"), "\n", w.Body)
	// Output:
	// 503 Retry-After: 1
	// {"error":{"code":"unavailable","message":"2 partitions have no reachable, restored owner","missing_partitions":[5,6]}}
}

func ExampleWrite() {
	w := httptest.NewRecorder()
	httperr.Write(w, httperr.BadParameter, "window", `parameter "window": 7s is not a multiple of the slot width 10s`)
	fmt.Print(w.Code, " ", http.StatusText(w.Code), "\n", w.Body)
	// Output:
	// 400 Bad Request
	// {"error":{"code":"bad_parameter","message":"parameter \"window\": 7s is not a multiple of the slot width 10s","param":"window"}}
}
