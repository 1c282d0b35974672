package promapi

import (
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/promql/parser"
)

// maxQueryTokens bounds the tokens of a query (names, numbers, operators, parentheses;
// a string is one, a comment none) that the API hands to Prometheus' parser. The parser's
// time grows with the square of an expression's depth, as each node asks its children's
// type all the way down, and a chain of binary operators (x+x+…, a or b or …) is as deep as
// it is long: a 200 KB chain held a core for minutes, and a 1 MiB form for about ten. At
// this bound the worst shape parses in a fraction of a second; a dashboard's query is tens
// or hundreds of tokens, and a long regexp is one string.
const maxQueryTokens = 10_000

// checkQueryText refuses a query of more than maxQueryTokens tokens, counted in one pass
// over its bytes without parsing it.
func checkQueryText(q string) *apiError {
	n := 0
	for i := 0; i < len(q); n++ {
		if n > maxQueryTokens {
			return badParam("query", fmt.Errorf("more than %d tokens (names, numbers, operators, parentheses; strings and comments aside): slide bounds a query's length as PromQL's parser takes time growing with its square; split the query", maxQueryTokens))
		}
		switch c := q[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			n--
			i++
		case c == '#': // a comment, to the end of its line
			n--
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			i++
			for i < len(q) && q[i] != c {
				if q[i] == '\\' && c != '`' {
					i++
				}
				i++
			}
			i++
		case !cutsName(c) || c == '.':
			for i < len(q) && (!cutsName(q[i]) || q[i] == '.') {
				i++
			}
		default:
			i++
		}
	}
	return nil
}

// parseExpr is the parser's reading of a query, refused as a 400 when it is past the
// bound.
func (a *API) parseExpr(q string) (parser.Expr, *apiError) {
	if aerr := checkQueryText(q); aerr != nil {
		return nil, aerr
	}
	expr, err := a.parser.ParseExpr(q)
	if err != nil {
		return nil, badParam("query", err)
	}
	return expr, nil
}

// maxFormatDepth bounds the depth of a query that format_query prints: Prometheus' Pretty
// indents each level anew, so its text grows with the square of the depth and its time
// faster (a chain of 2,000 additions printed 7.8 MB in 13 s). A written query is a few
// levels deep; this one prints in milliseconds.
const maxFormatDepth = 200

// checkFormatDepth refuses an expression deeper than maxFormatDepth.
func checkFormatDepth(expr parser.Expr) *apiError {
	deep := false
	parser.Inspect(expr, func(_ parser.Node, path []parser.Node) error {
		if len(path) >= maxFormatDepth {
			deep = true
			return errors.New("deep") // stops the walk
		}
		return nil
	})
	if deep {
		return badParam("query", fmt.Errorf("more than %d levels deep (tokens in parentheses, operators in a chain): format_query's printing grows with the square of the depth; format it in parts", maxFormatDepth))
	}
	return nil
}
