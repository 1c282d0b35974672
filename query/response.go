package query

// The answers of the read routes, declared once for clients: cmd/slide's query command and
// the tests decode into them. The server writes its answers with jsonenc, not with these
// types (no reflection on the hot routes); TestResponseTypesDecodeAnswers keeps the two in
// step. A null number (an empty window's avg, min, max or quantile: JSON has no NaN) is a
// nil pointer.

// Stats are the numbers of one window as /v1/window, each /v1/top entry and each /v1/range
// point write them.
type Stats struct {
	Count    uint64   `json:"count"`
	Sum      float64  `json:"sum"`
	Avg      *float64 `json:"avg"`
	Min      *float64 `json:"min"`
	Max      *float64 `json:"max"`
	RatePerS float64  `json:"rate_per_s"`
	// ElapsedS is the part of the window already elapsed, RatePerS's denominator.
	ElapsedS *float64 `json:"elapsed_s"`
	// Quantiles are keyed as asked, as fractions: "0.95".
	Quantiles map[string]*float64 `json:"quantiles"`
}

// Flagged is present in an answer read without some partitions (partial=allow).
type Flagged struct {
	Partial           bool    `json:"partial,omitempty"`
	MissingPartitions []int32 `json:"missing_partitions,omitempty"`
}

// WindowResponse is the answer of GET /v1/window.
type WindowResponse struct {
	Metric string `json:"metric"`
	Key    string `json:"key"`
	Window string `json:"window"`
	// Match is match= as given; By is by= of a grouped read, whose answer is Groups
	// instead of the members below.
	Match  string        `json:"match,omitempty"`
	By     []string      `json:"by,omitempty"`
	Groups []WindowGroup `json:"groups,omitempty"`
	// Warnings say what a read did that its asker may not expect (a by= label no selected
	// series has), as Prometheus' API answers do.
	Warnings []string `json:"warnings,omitempty"`
	From     int64    `json:"from"`
	To       int64    `json:"to"`
	Series   int      `json:"series"`
	Stats
	Flagged
}

// WindowGroup is one group of a grouped /v1/window answer (by=): its by-labels (a label its
// series do not have is left out) and the members a /v1/window answer has for its aggregate.
type WindowGroup struct {
	Labels map[string]string `json:"labels"`
	From   int64             `json:"from"`
	To     int64             `json:"to"`
	Series int               `json:"series"`
	Stats
}

// TopResponse is the answer of GET /v1/top.
type TopResponse struct {
	Metric string     `json:"metric"`
	By     string     `json:"by"`
	Window string     `json:"window"`
	Match  string     `json:"match,omitempty"`
	From   int64      `json:"from"`
	To     int64      `json:"to"`
	Series int        `json:"series"`
	Top    []TopEntry `json:"top"`
	Flagged
}

// TopEntry is one ranked series of a TopResponse: Value is its ranking number (the by=).
type TopEntry struct {
	Key string `json:"key"`
	// Labels are the series' labels besides key; absent for a series without.
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
	Stats
}

// ErrorResponse is the answer of every route that fails (httperr.Write): Code is one of
// httperr's codes, Param names the bad parameter of a 400 bad_parameter.
type ErrorResponse struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param,omitempty"`
	} `json:"error"`
}
