package usage

import (
	"bytes"

	"gopkg.in/yaml.v3"

	"github.com/slide-metrics/slide/limiter"
)

// LoadFile reads a policy file holding the limiter's "policies" and usage "rules" (see
// ParseFile).
func LoadFile(path string) ([]limiter.Policy, []Rule, error) {
	data, err := limiter.ReadPolicyFile(path)
	if err != nil {
		return nil, nil, err
	}
	return ParseFile(data, path)
}

// ParseFile parses a whole policy file: the "policies" list with limiter.ParsePolicies and
// the "rules" list with ParseRules, errors of both with the file's line numbers. Either list
// may be absent, not both. limiter.ParsePolicies refuses top-level keys it does not know,
// so it is handed the file with the rules block blanked line for line: its line numbers
// stay those of the file.
func ParseFile(data []byte, source string) ([]limiter.Policy, []Rule, error) {
	rules, err := ParseRules(data, source)
	if err != nil {
		return nil, nil, err
	}
	var doc yaml.Node
	_ = yaml.Unmarshal(data, &doc) // ParseRules has parsed it
	if len(doc.Content) == 0 {
		return nil, nil, &RuleError{Source: source + ":1", Msg: `empty file: want a "policies:" list, a "rules:" list, or both`}
	}
	root := doc.Content[0]
	hasPolicies := false
	first, last := 0, 0 // 1-based lines of the rules block, inclusive
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "policies":
			hasPolicies = true
		case "rules":
			first, last = root.Content[i].Line, lineCount(data)
			if i+2 < len(root.Content) {
				last = root.Content[i+2].Line - 1
			}
		}
	}
	if !hasPolicies {
		if len(rules) == 0 {
			return nil, nil, &RuleError{Source: source, Msg: `want a "policies:" list, a "rules:" list, or both`}
		}
		return nil, rules, nil
	}
	policies, err := limiter.ParsePolicies(blankLines(data, first, last), source)
	if err != nil {
		return nil, nil, err
	}
	return policies, rules, nil
}

func lineCount(data []byte) int { return bytes.Count(data, []byte("\n")) + 1 }

// blankLines empties lines first..last (1-based, inclusive) and keeps every newline.
func blankLines(data []byte, first, last int) []byte {
	if first == 0 {
		return data
	}
	out := make([]byte, 0, len(data))
	line := 1
	for _, c := range data {
		if c == '\n' {
			line++
			out = append(out, c)
			continue
		}
		if line < first || line > last {
			out = append(out, c)
		}
	}
	return out
}
