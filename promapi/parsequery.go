package promapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// parseQuery is /api/v1/parse_query: the expression's syntax tree in the JSON Prometheus 3
// answers (its UI's tree view and explain pane ask for it), or the parse error as
// format_query gives it. Prometheus marshals the tree as maps, so every object's keys
// come sorted: the node types below declare their fields in that order.
func (a *API) parseQuery(r *http.Request) ([]byte, notes, *apiError) {
	expr, aerr := a.parseExpr(r.Form.Get("query"))
	if aerr != nil {
		return nil, notes{}, aerr
	}
	node, err := astNode(expr)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(node); err == nil {
			return b, notes{}, nil
		}
	}
	return nil, notes{}, &apiError{errExec, fmt.Errorf("translating the syntax tree: %w", err)}
}

type astAggregation struct {
	Expr     any      `json:"expr"`
	Grouping []string `json:"grouping"`
	Op       string   `json:"op"`
	Param    any      `json:"param"`
	Type     string   `json:"type"`
	Without  bool     `json:"without"`
}

type astBinary struct {
	Bool     bool         `json:"bool"`
	LHS      any          `json:"lhs"`
	Matching *astMatching `json:"matching"`
	Op       string       `json:"op"`
	RHS      any          `json:"rhs"`
	Type     string       `json:"type"`
}

type astMatching struct {
	Card       string `json:"card"`
	FillValues struct {
		LHS *float64 `json:"lhs"`
		RHS *float64 `json:"rhs"`
	} `json:"fillValues"`
	Include []string `json:"include"`
	Labels  []string `json:"labels"`
	On      bool     `json:"on"`
}

type astCall struct {
	Args []any `json:"args"`
	Func struct {
		ArgTypes   []parser.ValueType `json:"argTypes"`
		Name       string             `json:"name"`
		ReturnType parser.ValueType   `json:"returnType"`
		Variadic   int                `json:"variadic"`
	} `json:"func"`
	Type string `json:"type"`
}

type astMatrix struct {
	Anchored   bool         `json:"anchored"`
	Matchers   []astMatcher `json:"matchers"`
	Name       string       `json:"name"`
	Offset     int64        `json:"offset"`
	OffsetExpr any          `json:"offsetExpr"`
	Range      int64        `json:"range"`
	RangeExpr  any          `json:"rangeExpr"`
	Smoothed   bool         `json:"smoothed"`
	StartOrEnd *string      `json:"startOrEnd"`
	Timestamp  *int64       `json:"timestamp"`
	Type       string       `json:"type"`
}

type astVector struct {
	Anchored   bool         `json:"anchored"`
	Matchers   []astMatcher `json:"matchers"`
	Name       string       `json:"name"`
	Offset     int64        `json:"offset"`
	OffsetExpr any          `json:"offsetExpr"`
	Smoothed   bool         `json:"smoothed"`
	StartOrEnd *string      `json:"startOrEnd"`
	Timestamp  *int64       `json:"timestamp"`
	Type       string       `json:"type"`
}

type astSubquery struct {
	Expr       any     `json:"expr"`
	Offset     int64   `json:"offset"`
	OffsetExpr any     `json:"offsetExpr"`
	Range      int64   `json:"range"`
	RangeExpr  any     `json:"rangeExpr"`
	StartOrEnd *string `json:"startOrEnd"`
	Step       int64   `json:"step"`
	StepExpr   any     `json:"stepExpr"`
	Timestamp  *int64  `json:"timestamp"`
	Type       string  `json:"type"`
}

type astMatcher struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

type astDuration struct {
	LHS     any    `json:"lhs"`
	Op      string `json:"op"`
	RHS     any    `json:"rhs"`
	Type    string `json:"type"`
	Wrapped bool   `json:"wrapped"`
}

// astDurationNumber is a number inside a duration expression, which says whether it was
// written as a duration (5m) or a number.
type astDurationNumber struct {
	Duration bool   `json:"duration"`
	Type     string `json:"type"`
	Val      string `json:"val"`
}

type astValue struct { // a number or string literal
	Type string `json:"type"`
	Val  string `json:"val"`
}

type astWrap struct { // a parenthesis or unary operator around an expression
	Expr any    `json:"expr"`
	Op   string `json:"op,omitempty"`
	Type string `json:"type"`
}

// astNode is the JSON object of one node of a parsed expression (nil for none).
func astNode(e parser.Expr) (any, error) {
	if e == nil {
		return nil, nil
	}
	switch n := e.(type) {
	case *parser.AggregateExpr:
		x, err := astNode(n.Expr)
		if err != nil {
			return nil, err
		}
		p, err := astNode(n.Param)
		return astAggregation{Expr: x, Grouping: orEmpty(n.Grouping), Op: n.Op.String(), Param: p, Type: "aggregation", Without: n.Without}, err
	case *parser.BinaryExpr:
		l, err := astNode(n.LHS)
		if err != nil {
			return nil, err
		}
		r, err := astNode(n.RHS)
		b := astBinary{Bool: n.ReturnBool, LHS: l, Op: n.Op.String(), RHS: r, Type: "binaryExpr"}
		if m := n.VectorMatching; m != nil {
			b.Matching = &astMatching{Card: m.Card.String(), Include: orEmpty(m.Include), Labels: orEmpty(m.MatchingLabels), On: m.On}
			b.Matching.FillValues.LHS, b.Matching.FillValues.RHS = m.FillValues.LHS, m.FillValues.RHS
		}
		return b, err
	case *parser.Call:
		c := astCall{Args: make([]any, 0, len(n.Args)), Type: "call"}
		for _, arg := range n.Args {
			x, err := astNode(arg)
			if err != nil {
				return nil, err
			}
			c.Args = append(c.Args, x)
		}
		c.Func.ArgTypes, c.Func.Name, c.Func.ReturnType, c.Func.Variadic = n.Func.ArgTypes, n.Func.Name, n.Func.ReturnType, n.Func.Variadic
		return c, nil
	case *parser.MatrixSelector:
		vs, ok := n.VectorSelector.(*parser.VectorSelector)
		if !ok {
			return nil, fmt.Errorf("a range selector over %T", n.VectorSelector)
		}
		rng, err := astDurationOf(n.RangeExpr)
		if err != nil {
			return nil, err
		}
		off, err := astDurationOf(vs.OriginalOffsetExpr)
		return astMatrix{Anchored: vs.Anchored, Matchers: astMatchers(vs.LabelMatchers), Name: vs.Name,
			Offset: vs.OriginalOffset.Milliseconds(), OffsetExpr: off, Range: n.Range.Milliseconds(), RangeExpr: rng,
			Smoothed: vs.Smoothed, StartOrEnd: startOrEnd(vs.StartOrEnd), Timestamp: vs.Timestamp, Type: "matrixSelector"}, err
	case *parser.SubqueryExpr:
		x, err := astNode(n.Expr)
		if err != nil {
			return nil, err
		}
		s := astSubquery{Expr: x, Offset: n.OriginalOffset.Milliseconds(), Range: n.Range.Milliseconds(),
			StartOrEnd: startOrEnd(n.StartOrEnd), Step: n.Step.Milliseconds(), Timestamp: n.Timestamp, Type: "subquery"}
		if s.RangeExpr, err = astDurationOf(n.RangeExpr); err != nil {
			return nil, err
		}
		if s.OffsetExpr, err = astDurationOf(n.OriginalOffsetExpr); err != nil {
			return nil, err
		}
		s.StepExpr, err = astDurationOf(n.StepExpr)
		return s, err
	case *parser.DurationExpr:
		return astDurationOf(n)
	case *parser.NumberLiteral:
		return astValue{Type: "numberLiteral", Val: strconv.FormatFloat(n.Val, 'f', -1, 64)}, nil
	case *parser.StringLiteral:
		return astValue{Type: "stringLiteral", Val: n.Val}, nil
	case *parser.ParenExpr:
		x, err := astNode(n.Expr)
		return astWrap{Expr: x, Type: "parenExpr"}, err
	case *parser.UnaryExpr:
		x, err := astNode(n.Expr)
		return astWrap{Expr: x, Op: n.Op.String(), Type: "unaryExpr"}, err
	case *parser.VectorSelector:
		off, err := astDurationOf(n.OriginalOffsetExpr)
		return astVector{Anchored: n.Anchored, Matchers: astMatchers(n.LabelMatchers), Name: n.Name,
			Offset: n.OriginalOffset.Milliseconds(), OffsetExpr: off, Smoothed: n.Smoothed,
			StartOrEnd: startOrEnd(n.StartOrEnd), Timestamp: n.Timestamp, Type: "vectorSelector"}, err
	}
	return nil, fmt.Errorf("unsupported node %T", e)
}

// astDurationOf is a duration expression's node (a range, offset or step written as
// arithmetic: [5m+1m]), whose numbers say whether they were written as durations; nil for
// none, as a plain duration has none.
func astDurationOf(e parser.Expr) (any, error) {
	switch n := e.(type) {
	case nil:
		return nil, nil
	case *parser.DurationExpr:
		if n == nil {
			return nil, nil
		}
		l, err := astDurationOf(n.LHS)
		if err != nil {
			return nil, err
		}
		r, err := astDurationOf(n.RHS)
		return astDuration{LHS: l, Op: n.Op.String(), RHS: r, Type: "durationExpr", Wrapped: n.Wrapped}, err
	case *parser.NumberLiteral:
		if n == nil {
			return nil, nil
		}
		return astDurationNumber{Duration: n.Duration, Type: "numberLiteral", Val: strconv.FormatFloat(n.Val, 'f', -1, 64)}, nil
	}
	return astNode(e)
}

func astMatchers(ms []*labels.Matcher) []astMatcher {
	out := make([]astMatcher, 0, len(ms))
	for _, m := range ms {
		out = append(out, astMatcher{Name: m.Name, Type: m.Type.String(), Value: m.Value})
	}
	return out
}

// startOrEnd is an @ start() or @ end() modifier's name, nil without one.
func startOrEnd(t parser.ItemType) *string {
	if t == 0 {
		return nil
	}
	s := t.String()
	return &s
}

func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
