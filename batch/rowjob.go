package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// groupChunk is how many rows a group-by job takes before stepping them group by group (a
// variable for the tests).
var groupChunk = 32 << 10

// runRows is the row-by-row job over src.
func (j Job) runRows(ctx context.Context, src rowSource, series func(SeriesRow) error, bytesRead func() int64) (Report, error) {
	j = j.withDefaults()
	aggs := j.Aggregates()
	cols := src.Columns()
	timeCol := ""
	if j.Span > 0 {
		timeCol = j.TimeColumn
		if indexOf(cols, timeCol) < 0 {
			return Report{}, missingColumn(timeCol, cols)
		}
	}
	valCol := j.Column
	if valCol == "" && !j.countOnly() {
		var err error
		if valCol, err = j.detectColumn(src); err != nil {
			return Report{}, err
		}
	}
	for _, c := range []string{j.GroupBy, j.IDColumn} {
		if c != "" && indexOf(cols, c) < 0 {
			return Report{}, missingColumn(c, cols)
		}
	}
	if err := src.Select([]string{valCol, timeCol, j.GroupBy, j.IDColumn}); err != nil {
		return Report{}, err
	}
	typed, _ := src.(typedSource)
	if typed != nil {
		typed.setTyped()
	}
	var fx *fixedSpec
	if j.Size > 0 && valCol != "" {
		var first []byte
		if fr := src.FirstRow(); fr != nil {
			if i := indexOf(cols, valCol); i >= 0 && i < len(fr) {
				first = fr[i]
			}
		}
		s := newFixedSpec(first, j.Size)
		fx = &s
	}
	newGroup := func(name string) (*groupState, error) {
		// The ring of the window's rows grows as the group's rows come (push), up to K+1 rows
		// for a count window: a group of a few rows must not cost K of them.
		g := &groupState{name: name, best: make([]bestWin, len(aggs)), hasTS: timeCol != "", hasID: j.IDColumn != ""}
		for _, a := range aggs {
			jj := j
			jj.Agg = a
			var agg aggregator
			if fx != nil && (a == AggSum || a == AggAvg) {
				agg = newGenFixedSum(fx, j.Size, a == AggAvg)
			} else {
				var err error
				if agg, err = jj.aggregator(); err != nil {
					return nil, err
				}
			}
			g.aggs = append(g.aggs, agg)
		}
		return g, nil
	}
	var (
		groups = map[string]*groupState{}
		one    *groupState
		rep    = Report{}
		row    int64 // data rows seen, bad ones included
		prevTS = int64(math.MinInt64)
		isMax  = j.Best == BestMax
		vals   = make([]float64, 1)
		tsb    = make([]int64, 1)
		out    = make([]float64, 1)
		start  = make([]int64, 1)
		sts    = make([]int64, 1)
		svals  = make([]float64, len(aggs))
	)
	skip := func(err error, line int64) error {
		var re *RowError
		if errors.As(err, &re) {
			re.Row = row
			if re.Line == 0 {
				re.Line = line
			}
		}
		if !j.SkipBad {
			return err
		}
		reason := skipReason(err)
		if rep.Skipped == nil {
			rep.Skipped, rep.FirstSkipped = map[string]int64{}, map[string]int64{}
		}
		if rep.Skipped[reason] == 0 {
			rep.FirstSkipped[reason] = line
		}
		rep.Skipped[reason]++
		return nil
	}
	// step is one good row's windows in its group. With GroupBy and no series, rows are
	// taken in chunks of groupChunk and stepped group by group (a counting sort by group,
	// input order within each group): a group's state is then read once per chunk, not once
	// per row, and 1,000 groups cost little more than one. Each group sees its rows in input
	// order, so its windows, best and ties are those of the row-by-row order; errors are
	// reported as that order would (the earliest row's, see fail).
	step := func(g *groupState, v float64, m rowMeta) error {
		g.push(m)
		local := g.local
		g.local++
		vals[0], tsb[0] = v, m.ts
		full := j.Span > 0 || local >= int64(j.Size-1)
		var startLocal int64
		for a, agg := range g.aggs {
			agg.feed(vals, tsb[:min(1, len(tsb))], out, start, sts)
			w := out[0]
			if j.Span > 0 {
				startLocal = start[0]
			} else {
				startLocal = local - int64(j.Size) + 1
			}
			svals[a] = w
			if !full {
				continue
			}
			if !finite(w) {
				return &RowError{Row: m.row, Line: m.line, Column: valCol, Err: ErrOverflow}
			}
			b := &g.best[a]
			if !b.found || (isMax && w > b.v) || (!isMax && w < b.v) {
				b.found, b.v, b.start, b.end = true, w, g.at(startLocal), m
			}
		}
		if full && series != nil {
			sr := SeriesRow{Group: g.name, Row: m.row, Line: m.line, TS: m.ts, HasTS: j.Span > 0, Values: svals}
			if err := series(sr); err != nil {
				return fmt.Errorf("writing series: %w", err)
			}
		}
		if j.Size > 0 {
			startLocal = local - int64(j.Size) + 1
		}
		g.dropBefore(startLocal) // later windows start at or after this one's first row
		return nil
	}
	chunked := j.GroupBy != "" && series == nil
	type pendRow struct {
		gid int32
		v   float64
		m   rowMeta
	}
	var (
		pend   []pendRow
		sorted []pendRow
		cnt    []int32
		glist  []*groupState // by groupState.id
	)
	flush := func() error {
		if len(pend) == 0 {
			return nil
		}
		rows := pend
		inOrder := len(glist) > len(pend) // sorting would cost O(groups) and save nothing
		if !inOrder {
			cnt = append(cnt[:0], make([]int32, len(glist)+1)...)
			for i := range pend {
				cnt[pend[i].gid+1]++
			}
			for i := 1; i < len(cnt); i++ {
				cnt[i] += cnt[i-1]
			}
			sorted = append(sorted[:0], pend...) // the length; every entry is overwritten
			for i := range pend {
				id := pend[i].gid
				sorted[cnt[id]] = pend[i]
				cnt[id]++
			}
			rows = sorted
		}
		var first error
		firstRow, skipG := int64(math.MaxInt64), int32(-1)
		for i := range rows {
			p := &rows[i]
			if p.gid == skipG {
				continue
			}
			if err := step(glist[p.gid], p.v, p.m); err != nil {
				if p.m.row < firstRow {
					first, firstRow = err, p.m.row
				}
				if inOrder {
					break // the earliest row's error
				}
				skipG = p.gid // in group order its later rows come next: skip them
			}
		}
		pend = pend[:0]
		return first
	}
	// fail returns err, or the error of an earlier pending row.
	fail := func(err error) (Report, error) {
		if ferr := flush(); ferr != nil {
			return rep, ferr
		}
		return rep, err
	}
	for ; ; row++ {
		if row&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			if j.Progress != nil && row > 0 {
				j.Progress(row, bytesRead())
			}
		}
		fields, line, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var re *RowError
			if !errors.As(err, &re) {
				return fail(err)
			}
			if err := skip(err, line); err != nil {
				return fail(err)
			}
			continue
		}
		var v float64
		var haveV, haveT bool
		var t int64
		if typed != nil {
			v, haveV = typed.number()
			t, haveT = typed.millis()
		}
		if valCol != "" && !haveV {
			if v, err = parseValue(fields[0]); err != nil {
				if err := skip(&RowError{Line: line, Column: valCol, Value: shown(fields[0]), Err: err}, line); err != nil {
					return fail(err)
				}
				continue
			}
		}
		m := rowMeta{row: row, line: line}
		if timeCol != "" {
			if !haveT {
				t, err = ParseTime(trimSpace(fields[1]))
			}
			if err != nil {
				if err := skip(&RowError{Line: line, Column: timeCol, Value: shown(fields[1]), Err: err}, line); err != nil {
					return fail(err)
				}
				continue
			}
			if t < prevTS {
				err := &RowError{Line: line, Column: timeCol,
					Value: strconv.FormatInt(t, 10) + " < " + strconv.FormatInt(prevTS, 10), Err: ErrUnsorted}
				if err := skip(err, line); err != nil {
					return fail(err)
				}
				continue
			}
			prevTS, m.ts = t, t
		}
		if j.IDColumn != "" {
			m.id = string(fields[3])
		}
		g := one
		if j.GroupBy != "" {
			g = groups[string(fields[2])]
		}
		if g == nil {
			name := ""
			if j.GroupBy != "" {
				name = string(fields[2])
			}
			if g, err = newGroup(name); err != nil {
				return fail(err)
			}
			if j.GroupBy != "" {
				groups[name] = g
				g.id = len(glist)
				glist = append(glist, g)
			} else {
				one = g
			}
		}
		rep.N++
		if chunked {
			pend = append(pend, pendRow{int32(g.id), v, m})
			if len(pend) == groupChunk {
				if err := flush(); err != nil {
					return rep, err
				}
			}
			continue
		}
		if err := step(g, v, m); err != nil {
			return rep, err
		}
	}
	if err := flush(); err != nil {
		return rep, err
	}
	if rep.N == 0 {
		return rep, ErrNoRows
	}
	var all []*groupState
	if one != nil {
		all = append(all, one)
	}
	for _, g := range groups {
		all = append(all, g)
	}
	slices.SortFunc(all, func(a, b *groupState) int { return cmp.Compare(a.name, b.name) })
	anyFound := false
	for _, g := range all {
		for a, agg := range aggs {
			b := g.best[a]
			res := Result{Agg: agg, Size: j.Size, Span: j.Span, N: g.local, Best: math.NaN(), Start: -1, End: -1,
				Group: g.name, HasGroup: j.GroupBy != "", HasID: j.IDColumn != ""}
			if !b.found {
				res.TooFew = true
			} else {
				anyFound = true
				res.Best, res.Start, res.End = b.v, b.start.row, b.end.row
				res.StartLine, res.EndLine = b.start.line, b.end.line
				res.StartID, res.EndID = b.start.id, b.end.id
				if j.Span > 0 {
					res.StartTS, res.EndTS = b.start.ts, b.end.ts
				}
			}
			if j.GroupBy == "" {
				res.N = rep.N
			}
			rep.Results = append(rep.Results, res)
		}
	}
	if !anyFound && j.GroupBy != "" {
		// The file's rows are not the count that fell short: each group's are.
		big := all[0]
		for _, g := range all {
			if g.local > big.local {
				big = g
			}
		}
		return rep, fmt.Errorf("%w: no group has %d rows (%d groups; the largest, %q, has %d)",
			ErrTooFewRows, j.Size, len(all), big.name, big.local)
	}
	if !anyFound {
		return rep, fmt.Errorf("%w: %d rows, window size %d", ErrTooFewRows, rep.N, j.Size)
	}
	return rep, nil
}
